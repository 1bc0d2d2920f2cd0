"""Measured comparisons of failover-client against raw stomp.py on real brokers.

Run one with ``python benchmarks/bench_failover.py`` (or ``python -m benchmarks.bench_failover``
from the repository root), or all of them with ``python benchmarks/run_all.py [--quick]``.
"""
