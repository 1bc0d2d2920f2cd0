"""Griffe extension for the API reference: the docstrings' reST roles as Markdown code.

The docstrings are written for readers of the source and name things with Sphinx roles
(``:class:`~failover_client.FailoverConnection```, ``:meth:`connect```); mkdocstrings renders
Markdown, where a role would show as typed. Each role becomes inline code of the name as a
reader would write it (``~`` keeps the last component), and a paragraph's closing ``::`` (a
reST literal block follows) a plain colon.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|exc|data|obj|const):`(?P<target>[^`]+)`")
_LITERAL_INTRO = re.compile(r"(?<=\S)::$", re.MULTILINE)


def _name(match: re.Match[str]) -> str:
    target = match.group("target")
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def convert(text: str) -> str:
    """A docstring with its roles as code spans and its ``::`` introductions as colons."""
    return _LITERAL_INTRO.sub(":", _ROLE.sub(_name, text))


class RstRoles(griffe.Extension):
    """Rewrites every docstring of every object griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
