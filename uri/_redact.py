"""Which option names hold secrets, and how secrets are hidden in text meant for people."""

from __future__ import annotations

import re

__all__ = ["MASK", "is_secret_key", "mask_same_length", "redact_pairs"]

MASK = "***"

# Substrings of a (lower-cased) option name that mark its value as a secret. "key" alone is not
# one of them: ``tls.keyFile`` is a path, ``tls.keyPassword`` is caught by "password".
_SECRET_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "apikey",
    "api_key",
    "pwd",
)

_USERINFO = re.compile(r"(//[^/?#@,()\s:]*:)([^/?#@,()\s]*)(@)")
_SECRET_PARAM = re.compile(
    r"([?&;,(]\s*[A-Za-z0-9_.\-]*(?:" + "|".join(_SECRET_WORDS) + r")[A-Za-z0-9_.\-]*=)"
    r"([^&;,()\s]*)",
    re.IGNORECASE,
)


def is_secret_key(name: str) -> bool:
    """True when an option called ``name`` carries a password, token or similar secret."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def redact_pairs(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``pairs`` with every secret value replaced by ``***``."""
    return tuple((k, MASK if is_secret_key(k) else v) for k, v in pairs)


def mask_same_length(text: str) -> str:
    """``text`` with passwords and secret option values starred out, keeping every offset.

    Error messages print the URI with a caret under the bad character; masking with the same
    number of characters keeps the caret in the right column. This works on raw text (it must
    not depend on the parse that just failed), so it is a deliberate over-approximation.
    """

    def userinfo(match: re.Match[str]) -> str:
        return match.group(1) + "*" * len(match.group(2)) + match.group(3)

    def param(match: re.Match[str]) -> str:
        return match.group(1) + "*" * len(match.group(2))

    return _SECRET_PARAM.sub(param, _USERINFO.sub(userinfo, text))
