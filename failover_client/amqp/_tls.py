"""The proton ``SSLDomain`` for TLS members, from the same ``tls_*`` options as STOMP.

proton runs TLS in its own C library, so the ``ssl.SSLContext`` that STOMP uses cannot be
handed to it. The options mean the same here: verification of the certificate chain and of
the host name is on unless switched off, against ``tls_ca_file`` or the system trust store,
with an optional client certificate. The files are first loaded by
:func:`failover_client.net._tls.build_ssl_context`, the one TLS builder of every adapter, so a
missing file, a key without its certificate or a wrong key password is the same
:class:`ConfigurationError` naming the option as with STOMP, raised at construction (the
connector builds the domain through :class:`~failover_client.net._tls.LazyTls`), not a TLS
failure on every reconnect.
"""

from __future__ import annotations

from proton import SSLDomain, SSLException

from failover_client._errors import ConfigurationError
from failover_client.net._tls import build_ssl_context
from failover_client.uri import FailoverOptions

__all__ = ["ssl_domain"]


def ssl_domain(options: FailoverOptions) -> SSLDomain:
    """A client domain following the ``tls_*`` options; ConfigurationError for unusable files."""
    build_ssl_context(options)  # the same checks, the same messages as the STOMP adapter's
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    try:
        if options.tls_verify:
            if options.tls_ca_file:
                domain.set_trusted_ca_db(options.tls_ca_file)
            mode = (
                SSLDomain.VERIFY_PEER_NAME if options.tls_verify_hostname else SSLDomain.VERIFY_PEER
            )
            domain.set_peer_authentication(mode, options.tls_ca_file)
        else:
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        if options.tls_cert_file:
            # Without a key file the key is in the certificate file (as ssl reads it).
            key_file = options.tls_key_file or options.tls_cert_file
            domain.set_credentials(options.tls_cert_file, key_file, options.tls_key_password)
    except SSLException as exc:
        raise ConfigurationError(f"TLS settings refused by proton: {exc}") from exc
    return domain
