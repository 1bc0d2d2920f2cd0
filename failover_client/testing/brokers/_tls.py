"""Key material for TLS connectors, made from a test CA (``trustme.CA``).

ActiveMQ reads Java key stores; PKCS12 is one that Python can write (``cryptography``) and
Java 9+ reads natively. The trust store (only needed to check client certificates) is written
with ``keytool``, because Java ignores certificate-only PKCS12 entries that lack its private
"trusted key usage" attribute, which ``cryptography`` cannot add.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._model import TlsOptions

if TYPE_CHECKING:
    import trustme

__all__ = ["broker_tls", "fresh_ca_and_broker_tls"]


def broker_tls(
    ca: trustme.CA,
    directory: Path,
    hostnames: Sequence[str] = ("127.0.0.1", "localhost"),
    client_ca: trustme.CA | None = None,
) -> TlsOptions:
    """Issue a server certificate from ``ca`` and write it as a PKCS12 key store (and PEM).

    With ``client_ca`` the broker also gets a trust store holding that CA and requires client
    certificates (``need_client_auth``).
    """
    # A test extra: importing the harness must not need it.
    from cryptography import x509  # noqa: PLC0415 - optional dependency
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415 - optional
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    directory.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(12)
    leaf = ca.issue_cert(*hostnames)
    key = load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    chain = [x509.load_pem_x509_certificate(blob.bytes()) for blob in leaf.cert_chain_pems]
    keystore = directory / "broker-keystore.p12"
    keystore.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker",
            key,  # type: ignore[arg-type]  # an RSA/EC key from trustme, never DH
            chain[0],
            chain[1:],
            BestAvailableEncryption(password.encode()),
        )
    )
    # RabbitMQ reads PEM files; the key file is readable by its owner only.
    certificate_pem = directory / "broker-chain.pem"
    certificate_pem.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key_pem = directory / "broker-key.pem"
    key_pem.touch(mode=0o600)
    key_pem.write_bytes(leaf.private_key_pem.bytes())
    if client_ca is None:
        return TlsOptions(keystore, password, certificate_pem=certificate_pem, key_pem=key_pem)
    truststore = directory / "broker-truststore.p12"
    ca_pem = directory / "client-ca.pem"
    client_ca.cert_pem.write_to_path(str(ca_pem))
    truststore.unlink(missing_ok=True)
    keytool = shutil.which("keytool")
    if keytool is None:
        raise FileNotFoundError("keytool not found (it comes with the JRE)")
    subprocess.run(  # noqa: S603 - fixed argv, no shell
        [
            keytool,
            "-importcert",
            "-noprompt",
            "-alias",
            "client-ca",
            "-file",
            str(ca_pem),
            "-keystore",
            str(truststore),
            "-storetype",
            "PKCS12",
            "-storepass",
            password,
        ],
        check=True,
        capture_output=True,
    )
    return TlsOptions(
        keystore,
        password,
        truststore,
        password,
        need_client_auth=True,
        certificate_pem=certificate_pem,
        key_pem=key_pem,
    )


def fresh_ca_and_broker_tls(directory: Path) -> tuple[TlsOptions, Path]:
    """A new CA (written to ``directory/ca.pem``) and a broker key store it signed.

    Returns the broker's TLS options and the CA file a client verifies the broker with.
    """
    import trustme  # noqa: PLC0415 - a test extra; importing this module must not need it

    ca = trustme.CA()
    directory.mkdir(parents=True, exist_ok=True)
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return broker_tls(ca, directory), ca_file
