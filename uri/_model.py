"""The parsed value: :class:`FailoverURI`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._address import BrokerAddress
from ._agent import DiscoveryAgent
from ._options import Dialect, FailoverOptions
from ._redact import Pairs

__all__ = ["Component", "Dialect", "FailoverURI", "Form"]

Form = Literal["failover", "static", "masterslave", "discovery", "artemis", "single"]
"""Which composite the text used: ``failover:(...)``, ``static:(...)``, ``masterslave:(...)``,
``discovery:(...)`` / ``udp://``, an Artemis list ``(...)``, or one plain member."""


Component: TypeAlias = "BrokerAddress | DiscoveryAgent | FailoverURI"


@dataclass(frozen=True, repr=False)
class FailoverURI:
    """A failover URI as a value: what was written, and what it means.

    What was written (enough to format it back):

    - ``components``: the list inside the parentheses, in order. A :class:`BrokerAddress`
      here carries only its *own* query; a nested composite is a nested ``FailoverURI``; a
      discovery agent is a :class:`DiscoveryAgent` (kept, not resolved).
    - ``query``: the shared options as written, in order, decoded (``nested.*``, ``jms.*``
      and all). Secret values read ``***``; ``query.reveal()`` / ``query.secret(name)`` give
      them in clear (as for ``nested``, ``passthrough`` and each member's ``params``).

    What it means (derived from the above by the parser):

    - ``members``: every broker, nested composites flattened, with ``nested.*`` (Classic, Qpid
      JMS: overrides the member's value) or shared transport options (Artemis: a default the
      member's own value beats) applied.
    - ``options``: the canonical :class:`FailoverOptions` under ``dialect``'s defaults.
    - ``agents``: every discovery agent, flattened, with its discovery parameters.
    - ``nested``: the ``nested.*`` / ``failover.nested.*`` pairs, prefix removed.
    - ``passthrough``: options accepted but not interpreted (``jms.*``, Artemis extras).

    ``str()`` and ``repr()`` redact passwords and secret options; :func:`format_uri` writes the
    secrets too, so ``parse(format_uri(x)) == x``.
    """

    form: Form
    dialect: Dialect
    members: tuple[BrokerAddress, ...]
    options: FailoverOptions
    components: tuple[Component, ...]
    query: tuple[tuple[str, str], ...] = ()
    agents: tuple[DiscoveryAgent, ...] = ()
    nested: tuple[tuple[str, str], ...] = ()
    passthrough: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # Whatever built this value, secrets reach callers only through ``reveal``/``secret``.
        for name in ("query", "nested", "passthrough"):
            value = getattr(self, name)
            if not isinstance(value, Pairs):
                object.__setattr__(self, name, Pairs(value))

    def secret(self, name: str, default: str | None = None) -> str | None:
        """The clear value of shared option ``name`` (e.g. ``trustStorePassword``); never log it."""
        return Pairs(self.query).secret(name, default)

    def __str__(self) -> str:
        """The URI with passwords and secret options shown as ``***``."""
        from ._format import format_uri  # noqa: PLC0415 - _format imports this module

        return format_uri(self, redact=True)

    def __repr__(self) -> str:
        return f"FailoverURI({str(self)!r})"

    def to_text(self) -> str:
        """The URI with its secrets, for handing to a connection (never log this)."""
        from ._format import format_uri  # noqa: PLC0415 - _format imports this module

        return format_uri(self)
