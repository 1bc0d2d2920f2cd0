"""``parse``: failover URI text -> :class:`FailoverURI`."""

from __future__ import annotations

from collections.abc import Collection

from ._build import build_raw
from ._model import Dialect, FailoverURI
from ._scan import scan

__all__ = ["parse"]


def parse(
    text: str, *, dialect: Dialect | None = None, policies: Collection[str] = ()
) -> FailoverURI:
    """Parse a failover URI in any supported dialect.

    ``dialect`` forces whose spellings and defaults apply (normally it is read from the option
    names: ``failover.*`` keys mean Qpid JMS, an ``(u1,u2)`` list means Artemis, and so on).
    ``policies`` adds registered policy names to the built-in ones a URI may name.

    Raises :class:`~failover_client.URIError` (with the offending position) for text that does
    not parse, and its subclass :class:`~failover_client.OptionError` for an unknown or
    ill-typed option. Nothing else escapes, whatever the input.
    """
    return build_raw(scan(text), text, dialect=dialect, policies=policies)
