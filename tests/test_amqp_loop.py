"""The adapter's proton Container: everything proton's own sets, but no default TLS set-up."""

from __future__ import annotations

from proton.reactor import Container

from failover_client.amqp._loop import PlainContainer


def test_the_plain_container_sets_what_proton_sets_but_no_default_tls() -> None:
    ours, theirs = PlainContainer(container_id="c"), Container(container_id="c")
    assert set(vars(ours)) == set(vars(theirs))
    assert ours.ssl is None
    assert theirs.ssl is not None  # proton's builds two OpenSSL contexts we never use
    for name in ("container_id", "allow_insecure_mechs", "allowed_mechs", "sasl_enabled"):
        assert getattr(ours, name) == getattr(theirs, name)
    assert type(ours.global_handler) is type(theirs.global_handler)
