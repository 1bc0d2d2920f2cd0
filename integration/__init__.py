"""Real-broker test harness and the integration tests that use it.

``integration.brokers`` is the library (clusters of ActiveMQ / RabbitMQ / Artemis brokers that
a test can kill, hang and restart); ``integration.plugin`` the pytest plugin with fixtures;
``integration.tls`` key stores for TLS connectors; ``python -m integration.measure`` prints
start-up, restart and memory figures.
"""
