"""Build the client ``ssl.SSLContext`` for TLS members from :class:`FailoverOptions`.

stomp.py's ``set_ssl`` builds a context per connect from file names and only knows "verify
everything" or "verify nothing"; it cannot verify the certificate while skipping the host name,
and it reloads the files on every reconnect. The adapter builds one context here, up front, so
a missing file or a wrong key password is a configuration error at construction time, not a
"broker unavailable" on every reconnect.

Verification (certificate chain and host name) is on unless the options switch it off.
"""

from __future__ import annotations

import ssl

from failover_client._errors import ConfigurationError
from failover_client.uri import FailoverOptions

__all__ = ["build_ssl_context"]


def build_ssl_context(options: FailoverOptions) -> ssl.SSLContext:
    """A TLS 1.2+ client context following the ``tls_*`` options.

    Raises :class:`ConfigurationError` naming the option whose file is missing or unusable
    (never showing the key password).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if options.tls_verify:
        # check_hostname must be switched off before verify_mode may be relaxed, and only
        # verify_mode=CERT_REQUIRED makes a hostname check meaningful.
        context.check_hostname = options.tls_verify_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        if options.tls_ca_file:
            try:
                context.load_verify_locations(cafile=options.tls_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigurationError(
                    f"tls_ca_file {options.tls_ca_file!r} cannot be loaded: {_reason(exc)}"
                ) from exc
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if options.tls_cert_file:
        try:
            context.load_cert_chain(
                certfile=options.tls_cert_file,
                keyfile=options.tls_key_file,
                password=options.tls_key_password,
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"tls_cert_file {options.tls_cert_file!r} / tls_key_file "
                f"{options.tls_key_file!r} cannot be loaded (is the tls_key_password right?): "
                f"{_reason(exc)}"
            ) from exc
    elif options.tls_key_file:
        raise ConfigurationError("tls_key_file is set but tls_cert_file is not; give both")
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None):
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
