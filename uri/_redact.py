"""Which option names hold secrets, and how secrets are hidden in text meant for people."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "MASK",
    "Pairs",
    "is_secret_key",
    "mask_same_length",
    "redact_pairs",
    "redact_value",
]

MASK = "***"

# Substrings of a (lower-cased) option name that mark its value as a secret. "key" alone is not
# one of them: ``tls.keyFile`` is a path, ``tls.keyPassword`` is caught by "password".
_SECRET_WORDS = (
    "password",
    "passcode",  # stomp.py's and the STOMP CONNECT header's name for the password
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "apikey",
    "api_key",
    "pwd",
)

# A password in userinfo may hold anything but the characters that end an authority; a blank
# or a parenthesis must not end the mask early, or the rest of the secret is printed.
_USERINFO = re.compile(r"(//[^/?#@:]*:)([^/?#@]*)(@)")
# Where a secret value ends, judged on raw text that may not parse: a separator counts only when
# what follows it looks like the URI going on (``&name=``, ``,scheme:``, ``)`` closing a list),
# so a secret holding ``;``, ``,``, ``)``, ``(`` or a blank is starred out whole. A balanced
# ``(...)`` (Jasypt's ``ENC(...)``) is always part of the value.
_VALUE_RUN = (
    r"(?:\([^()]*\)"
    r"|[^&;,)]"
    r"|[&;](?![A-Za-z0-9_.\-]+=)"
    r"|,(?!\s*[A-Za-z][A-Za-z0-9+.\-]*:)"
    r"|\)(?!\s*(?:[,)?]|$)))*"
)
_SECRET_PARAM = re.compile(
    r"([?&;,(]\s*[A-Za-z0-9_.\-]*(?:" + "|".join(_SECRET_WORDS) + r")[A-Za-z0-9_.\-]*=)"
    r"(" + _VALUE_RUN + ")",
    re.IGNORECASE,
)


def is_secret_key(name: str) -> bool:
    """True when an option called ``name`` carries a password, token or similar secret."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def redact_value(name: str, value: str) -> str:
    """``value`` of option ``name`` as it may be shown: ``***`` for a secret option, else the
    value with the secrets of a URL inside it starred out (``updateURIsURL=https://u:p@h/x``
    carries a password that no option name announces)."""
    if is_secret_key(name):
        return MASK
    if "@" not in value and "=" not in value:
        return value  # the common case: nothing a URL could hide a secret in
    masked = _USERINFO.sub(lambda m: m.group(1) + MASK + m.group(3), value)
    return _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, masked)


def redact_pairs(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``pairs`` with every secret value replaced by ``***`` (see :func:`redact_value`)."""
    return tuple((k, redact_value(k, v)) for k, v in pairs)


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


class Pairs(tuple[tuple[str, str], ...]):
    """Query pairs as written, with every secret value shown as ``***``.

    ``query`` and ``params`` are handed around, printed and logged; a secret must only come out
    of an accessor that says so. Iterating, indexing, ``repr()`` and ``dict()`` see ``***`` (for
    a secret option, and for a password inside a URL value: :func:`redact_value`);
    :meth:`secret` and :meth:`reveal` return the clear values (for connecting and for
    :func:`format_uri`). Equality and hashing use the clear values, so two URIs that differ only
    in a password are different values.
    """

    _clear: tuple[tuple[str, str], ...]

    def __new__(cls, pairs: Iterable[tuple[str, str]] = ()) -> Pairs:
        clear = pairs.reveal() if isinstance(pairs, Pairs) else tuple((k, v) for k, v in pairs)
        self = super().__new__(cls, redact_pairs(clear))
        self._clear = clear
        return self

    def reveal(self) -> tuple[tuple[str, str], ...]:
        """The pairs with secrets in clear (never log this)."""
        return self._clear

    def secret(self, name: str, default: str | None = None) -> str | None:
        """The clear value of option ``name`` (the first one written), or ``default``."""
        return next((v for k, v in self._clear if k == name), default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Pairs):
            return self._clear == other._clear
        if isinstance(other, tuple):
            return self._clear == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self._clear)

    def __reduce__(self) -> tuple[type[Pairs], tuple[tuple[tuple[str, str], ...]]]:
        return (Pairs, (self._clear,))
