"""This library's real-broker tests: brokers started, killed, hung and partitioned.

The brokers come from the shipped harness, :mod:`failover_client.testing.brokers`, and the
fixtures from :mod:`failover_client.testing.broker_fixtures` (switched on in ``conftest.py``).
"""
