"""ActiveMQ Classic brokers from the Debian package, many brokers from one install.

Each broker gets a base directory (conf/, data/, tmp/, broker.log) and its own ports, and is
started directly with ``java ... org.apache.activemq.console.Main start xbean:file:...`` (the
``activemq.jar`` launcher), with the flags Debian's ``/usr/bin/activemq`` passes on Java 9+.
The Debian start script and init script are not used: they assume one instance per name under
/var/lib/activemq and switch to the ``activemq`` user.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._activemq_config import LOG4J_PROPERTIES, ActiveMQConfig, render_broker_xml
from ._cluster import Cluster
from ._errors import BackendUnavailable
from ._local import LocalBroker
from ._model import BrokerKind, ClusterSpec, Endpoint
from ._ports import allocate_ports
from ._readiness import stomp_connected, tcp_accepts
from ._shared_store import SharedStoreCluster

__all__ = [
    "ACTIVEMQ_HOME",
    "DEFAULT_HEAP",
    "FAST_JVM_OPTIONS",
    "HEAP_VARIABLE",
    "LocalActiveMQ",
    "activemq_missing",
    "build_activemq_cluster",
]

ACTIVEMQ_HOME = Path("/usr/share/activemq")
LAUNCHER = ACTIVEMQ_HOME / "bin" / "activemq.jar"

# Jars that turn advisories into JSON for STOMP (transformation:jms-advisory-json). Without
# them such a SUBSCRIBE kills the connection (BROKERS.md). xpp3 is already in lib/optional.
ADVISORY_JARS = (Path("/usr/share/java/xstream.jar"), Path("/usr/share/java/jettison.jar"))

DEFAULT_HEAP = "1g"
"""Each broker's maximum heap unless ``ClusterSpec.heap`` or :data:`HEAP_VARIABLE` says
otherwise. 256 MB (the earlier default) ran out of memory at about 100,000 queued 128-byte
messages in a Spark sink load test (9 OutOfMemoryErrors, throughput down 17x); 1 GB held them.
The JVM starts at 64 MB and grows the heap only as the broker needs it."""

HEAP_VARIABLE = "FAILOVER_ACTIVEMQ_HEAP"
"""Environment variable that sets every harness ActiveMQ's heap (``-Xmx`` syntax: ``2g``)."""

# Start-up and footprint tuned for functional tests (BROKERS.md): C1 only, serial GC, a heap
# that starts small. Benchmarks should drop TieredStopAtLevel=1 (see ClusterSpec.jvm_options).
FAST_JVM_OPTIONS = (
    "-Xms64m",
    f"-Xmx{DEFAULT_HEAP}",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-XX:-UsePerfData",  # no hsperfdata files in /tmp
    # A killed process closes its sockets only after the kernel has freed its memory: 4 KiB
    # pages cost about 0.1 ms per MB, huge pages almost nothing. With the heap in huge pages
    # a SIGKILLed broker's clients see EOF after a median 6 ms instead of 10 (measured with
    # benchmarks/probe_failover_timeline.py). Where huge pages are off the flag does nothing.
    "-XX:+UseTransparentHugePages",
    "-Djava.net.preferIPv4Stack=true",
)

# What /usr/bin/activemq passes to a Java newer than 8 (ActiveMQ 5.17 reflects into these).
JAVA9_MODULE_FLAGS = (
    "--add-reads=java.xml=java.logging",
    "--add-opens=java.base/java.security=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.naming/javax.naming.spi=ALL-UNNAMED",
    "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.http=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.https=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.jar=ALL-UNNAMED",
    "--add-exports=jdk.xml.dom/org.w3c.dom.html=ALL-UNNAMED",
    "--add-exports=jdk.naming.rmi/com.sun.jndi.url.rmi=ALL-UNNAMED",
)

HOST = "127.0.0.1"
_JVM_ENV = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH")


def _java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def activemq_missing() -> str | None:
    """Why local ActiveMQ brokers cannot run here, or None when they can."""
    if not LAUNCHER.is_file():
        return f"ActiveMQ is not installed ({LAUNCHER} missing; run .ci/install-brokers)"
    if _java() is None:
        return "no java on PATH or in JAVA_HOME (run .ci/install-brokers)"
    return None


class LocalActiveMQ(LocalBroker):
    """One ActiveMQ Classic broker process."""

    kind = BrokerKind.ACTIVEMQ

    def __init__(
        self,
        name: str,
        base_dir: Path,
        config: ActiveMQConfig,
        endpoints: Mapping[str, Endpoint],
        jvm_options: Sequence[str],
    ) -> None:
        conf, data, tmp = base_dir / "conf", base_dir / "data", base_dir / "tmp"
        for d in (conf, data, tmp):
            d.mkdir(parents=True, exist_ok=True)
        (conf / "broker.xml").write_text(render_broker_xml(config))
        (conf / "log4j.properties").write_text(LOG4J_PROPERTIES)
        classpath = [str(conf)] + [str(j) for j in ADVISORY_JARS if j.is_file()]
        java = _java()
        if java is None:
            raise BackendUnavailable("no java found")
        argv = [
            java,
            *jvm_options,
            *JAVA9_MODULE_FLAGS,
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={tmp}",
            f"-Dactivemq.classpath={os.pathsep.join(classpath)}",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={base_dir}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={data}",
            "-jar",
            str(LAUNCHER),
            "start",
            # The file is generated (and parsed in the harness's tests): skipping the XSD
            # validation saves about a third of a second per start.
            f"xbean:file:{conf / 'broker.xml'}?validate=false",
        ]
        # A user's JVM options would change every broker (and the figures): keep them out.
        env = {k: v for k, v in os.environ.items() if k not in _JVM_ENV}
        super().__init__(name, endpoints, argv, env, base_dir)
        self.broker_name = config.broker_name
        self.data_dir = data
        if config.users:
            # The harness's own clients (probe, send, drain, queue_depth) log in as the first.
            self.credentials = (config.users[0].name, config.users[0].password)

    def probe(self, timeout: float = 1.0) -> bool:
        stomp = self.endpoint("stomp")
        login, passcode = self.credentials or (None, None)
        if not stomp_connected(stomp.host, stomp.port, timeout, login=login, passcode=passcode):
            return False
        # The connectors start one after another: the rest must accept too.
        return all(
            tcp_accepts(ep.host, ep.port, timeout)
            for key, ep in self.endpoints.items()
            if key != "stomp"
        )

    def queue_depth(self, queue: str) -> int | None:
        """Ask the statistics plugin (one STOMP request/reply, JSON via xstream/jettison)."""
        reply_to = f"/temp-queue/stats-{uuid.uuid4().hex}"
        with self.stomp_client() as session:
            session.subscribe(reply_to, headers={"transformation": "jms-map-json"}, ack="auto")
            session.send(
                f"/queue/ActiveMQ.Statistics.Destination.{queue}",
                [""],
                headers={"reply-to": reply_to},
                persistent=False,
            )
            replies = session.collect(timeout=5.0, idle=0.0, expect=1)
        if not replies:
            return None
        entries = json.loads(replies[0].body)["map"]["entry"]
        for entry in entries:
            if entry.get("string") == "size":
                return int(entry["long"])
        return None


def heap_of(spec: ClusterSpec) -> str:
    """The broker heap for ``spec``: its ``heap``, else $FAILOVER_ACTIVEMQ_HEAP, else 1 GB."""
    if spec.heap is not None:
        return spec.heap
    configured = os.environ.get(HEAP_VARIABLE, "").strip()
    if not configured:
        return DEFAULT_HEAP
    try:  # checked as ClusterSpec checks its field
        ClusterSpec(spec.kind, heap=configured)
    except ValueError:
        raise ValueError(
            f"${HEAP_VARIABLE}={configured!r}: give a size as -Xmx takes it, e.g. '1g'"
        ) from None
    return configured


def build_activemq_cluster(spec: ClusterSpec, root: Path) -> Cluster:
    """Create (not start) ``spec.size`` brokers under ``root``."""
    reason = activemq_missing()
    if reason is not None:
        raise BackendUnavailable(reason)
    per_broker = 2 + (1 if spec.tls else 0) + len(spec.extra_connectors)
    ports = allocate_ports(per_broker * spec.size)
    layouts = [ports[i * per_broker : (i + 1) * per_broker] for i in range(spec.size)]
    names = [f"{spec.label}-{i}" for i in range(spec.size)]
    openwire = [f"{HOST}:{p[1]}" for p in layouts]
    brokers = []
    for i, (name, p) in enumerate(zip(names, layouts, strict=True)):
        stomp_port, openwire_port, *rest = p
        endpoints = {
            "stomp": Endpoint("stomp", HOST, stomp_port),
            "tcp": Endpoint("tcp", HOST, openwire_port),
        }
        ssl_port = rest.pop(0) if spec.tls else None
        if ssl_port is not None:
            endpoints["stomp+ssl"] = Endpoint("stomp+ssl", HOST, ssl_port)
        extra = dict(zip(spec.extra_connectors, rest, strict=True))
        for conn, port in extra.items():
            endpoints[conn.name] = Endpoint(conn.scheme, HOST, port)
        config = ActiveMQConfig(
            broker_name=name,
            data_dir=str(root / name / "data"),
            host=HOST,
            stomp_port=stomp_port,
            openwire_port=openwire_port,
            network_peers=[o for j, o in enumerate(openwire) if j != i] if spec.network else (),
            advertise=spec.advertise,
            tls=spec.tls,
            ssl_port=ssl_port,
            extra=extra,
            users=spec.users,
            shared_store=str(root / "shared-kahadb") if spec.shared_store else None,
            max_page_size=spec.max_page_size,
        )
        jvm = (*(spec.jvm_options or FAST_JVM_OPTIONS), f"-Xmx{heap_of(spec)}")
        brokers.append(LocalActiveMQ(name, root / name, config, endpoints, jvm))
    if spec.shared_store:
        return SharedStoreCluster(spec, brokers, backend="local")
    return Cluster(spec, brokers, backend="local")
