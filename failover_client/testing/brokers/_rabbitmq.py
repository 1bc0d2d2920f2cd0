"""Independent RabbitMQ nodes from the Debian package, side by side on one machine.

Each node has its own node name (unique per test run), ports, mnesia and log directories and
its own enabled-plugins file (rabbitmq_stomp, rabbitmq_amqp1_0). The nodes of a cluster
register with a private ``epmd`` on a port of ours: the system epmd (port 4369, maybe
socket-activated by systemd) is never used or started, and ``-start_epmd false`` keeps the VM
from daemonising one outside our process group.

Traps handled here (BROKERS.md): RABBITMQ_DIST_PORT is set explicitly; a boot failure exits
with status 0, so readiness is the protocols answering; the system rabbitmq-env.conf and
advanced.config are replaced by files of ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

from ._cluster import Cluster
from ._errors import BackendUnavailable, BrokerError, BrokerStartError, PortTakenError
from ._local import LocalBroker
from ._model import BrokerKind, ClusterSpec, Endpoint, TlsOptions
from ._ownership import Ownership, PortState, port_owner
from ._ports import allocate_ports
from ._process import ManagedProcess
from ._readiness import Deadline, amqp_open, stomp_connected, tcp_accepts, wait_until

__all__ = ["LocalRabbitMQ", "build_rabbitmq_cluster", "rabbitmq_missing"]

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQCTL = Path("/usr/lib/rabbitmq/bin/rabbitmqctl")
HOST = "127.0.0.1"
PLUGINS = "[rabbitmq_stomp,rabbitmq_amqp1_0].\n"
DURABLE_QUEUE = {"durable": "true", "auto-delete": "false", "exclusive": "false"}


def rabbitmq_missing() -> str | None:
    """Why local RabbitMQ nodes cannot run here, or None when they can."""
    if not RABBITMQ_SERVER.is_file():
        return f"RabbitMQ is not installed ({RABBITMQ_SERVER} missing; run .ci/install-brokers)"
    if shutil.which("epmd") is None:
        return "epmd not found on PATH (comes with erlang-base; run .ci/install-brokers)"
    return None


def _node_config(
    amqp_port: int, stomp_port: int, tls: TlsOptions | None, amqps_port: int | None
) -> str:
    lines = [
        f"listeners.tcp.1 = {HOST}:{amqp_port}",
        f"stomp.listeners.tcp.1 = {HOST}:{stomp_port}",
        "log.console = true",
        "log.console.level = info",
        "log.console.use_colors = off",
        "log.file = false",
    ]
    if tls is not None and amqps_port is not None:
        if tls.certificate_pem is None or tls.key_pem is None:
            raise ValueError("RabbitMQ needs PEM files: TlsOptions from broker_tls() have them")
        if tls.need_client_auth:
            raise ValueError("client certificates are not set up for RabbitMQ nodes")
        # AMQP 1.0 (and 0.9.1) over TLS on its own port; clients show no certificate.
        lines += [
            f"listeners.ssl.1 = {HOST}:{amqps_port}",
            f"ssl_options.certfile = {tls.certificate_pem}",
            f"ssl_options.keyfile = {tls.key_pem}",
            "ssl_options.verify = verify_none",
            "ssl_options.fail_if_no_peer_cert = false",
        ]
    return "\n".join([*lines, ""])


class LocalRabbitMQ(LocalBroker):
    """One RabbitMQ node. AMQP 1.0 shares the AMQP port (protocol header negotiation)."""

    kind = BrokerKind.RABBITMQ
    credentials = ("guest", "guest")  # guest may log in over loopback, which is all we use
    vhost = "/"

    def __init__(
        self,
        name: str,
        node: str,
        base_dir: Path,
        *,
        home: Path,
        epmd_port: int,
        amqp_port: int,
        stomp_port: int,
        dist_port: int,
        tls: TlsOptions | None = None,
        amqps_port: int | None = None,
    ) -> None:
        base_dir.mkdir(parents=True, exist_ok=True)
        (base_dir / "rabbitmq.conf").write_text(
            _node_config(amqp_port, stomp_port, tls, amqps_port)
        )
        (base_dir / "enabled_plugins").write_text(PLUGINS)
        env = {
            # Nothing else from our environment: a user's ERL_* or RABBITMQ_* must not leak in.
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            # The Erlang cookie lives in $HOME; one home per cluster keeps it out of the user's.
            "HOME": str(home),
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_NODENAME": node,
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(amqp_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(base_dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base_dir / "log"),
            "RABBITMQ_LOGS": "-",  # to stdout, which is broker.log
            "RABBITMQ_CONFIG_FILE": str(base_dir / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(base_dir / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(base_dir / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base_dir / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(base_dir / "plugins-expand"),
            "RABBITMQ_PID_FILE": str(base_dir / "rabbitmq.pid"),
            # Idle schedulers must not spin and take CPU from the clients under test.
            "RABBITMQ_SCHEDULER_BUSY_WAIT_THRESHOLD": "none",
            # Several nodes share the cores: do not bind schedulers to CPUs.
            "RABBITMQ_SCHEDULER_BIND_TYPE": "u",
            # Make the script exec the VM instead of staying as a signal-forwarding parent, so
            # our pid is beam.smp itself; -noinput keeps the Erlang shell off stdin.
            "RABBITMQ_ALLOW_INPUT": "true",
            "RABBITMQ_SERVER_START_ARGS": "-noinput",
            # Every Erlang VM of the node, including the "epmd starter" that RabbitMQ spawns
            # outside our process group at boot, must use our epmd and never daemonise one.
            "ERL_FLAGS": "-start_epmd false",
        }
        endpoints = {
            "amqp": Endpoint("amqp", HOST, amqp_port),
            "stomp": Endpoint("stomp", HOST, stomp_port),
        }
        if amqps_port is not None:
            endpoints["amqps"] = Endpoint("amqps", HOST, amqps_port)
        super().__init__(name, endpoints, [str(RABBITMQ_SERVER)], env, base_dir)
        self.node = node
        self._ctl_env = {
            k: env[k] for k in ("PATH", "LANG", "HOME", "ERL_EPMD_PORT", "RABBITMQ_NODENAME")
        }
        # Queues declared durable by the harness; they survive restarts, so this does too.
        self._declared: set[str] = set()
        self._declared_lock = threading.Lock()

    def probe(self, timeout: float = 1.0) -> bool:
        stomp, amqp = self.endpoint("stomp"), self.endpoint("amqp")
        login, passcode = self.credentials
        # Cheap check first: AMQP open takes longer to fail against a port nobody holds.
        return (
            stomp_connected(
                stomp.host,
                stomp.port,
                timeout,
                login=login,
                passcode=passcode,
                vhost=self.vhost or "/",
            )
            and tcp_accepts(amqp.host, amqp.port, timeout)
            and amqp_open(amqp.host, amqp.port, max(timeout, 2.0), user=login, password=passcode)
        )

    # A SEND with persistent:false to a /queue/x that does not exist declares x exclusive and
    # auto-delete: it vanishes with the sender. So every SEND / SUBSCRIBE of the harness on
    # /queue/x says how to declare x (durable, shared); AMQP uses /amq/queue/x (an existing
    # queue) after declaring it over STOMP, as AMQP 1.0 has no such knobs here.

    def _declare_headers(self, destination: str) -> dict[str, str]:
        if destination.startswith("/queue/"):
            return dict(DURABLE_QUEUE)
        return {}

    def declare_queue(self, queue: str) -> None:
        """Declare a durable, shared queue ``queue`` (idempotent).

        Declaring takes a SUBSCRIBE in RabbitMQ's STOMP; it uses client acknowledgement with a
        prefetch of one and never acknowledges, so a message that was already waiting goes
        back to the queue when the connection closes (marked redelivered).
        """
        with self._declared_lock:
            if queue in self._declared:
                return
        with self.stomp_client() as session:
            sub = session.subscribe(
                f"/queue/{queue}",
                headers={**DURABLE_QUEUE, "prefetch-count": "1"},
                ack="client",
                auto_ack=False,
            )
            session.unsubscribe(sub)  # waits for the receipt: the queue exists now
        with self._declared_lock:
            self._declared.add(queue)

    def delete_queue(self, queue: str, timeout: float = 30.0) -> None:
        """Delete ``queue`` with ``rabbitmqctl``, under whatever consumes it (messages too).

        What an operator or a management script does to a queue a client still reads: the
        broker cancels its consumers (STOMP: an ERROR; AMQP 1.0: the link is detached).
        """
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [str(RABBITMQCTL), "-n", self.node, "delete_queue", queue],
            env=self._ctl_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise BrokerError(
                f"{self.name}: rabbitmqctl delete_queue {queue} failed "
                f"(exit {done.returncode}): {(done.stdout + done.stderr).strip()[-400:]}"
            )
        with self._declared_lock:
            self._declared.discard(queue)

    def sync_definitions(self, timeout: float = 30.0) -> None:
        """Force the node's metadata log (queue definitions) to disk.

        RabbitMQ 3.10 keeps recent Mnesia transactions in a buffered log: a durable queue
        declared a second before a SIGKILL was gone after the restart, and with it every
        persistent message it held. A test that kills a node right after declaring calls this
        first; ``mnesia:sync_log()`` flushes and fsyncs that log.
        """
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [str(RABBITMQCTL), "-n", self.node, "eval", "mnesia:sync_log()."],
            env=self._ctl_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or "ok" not in done.stdout:
            raise BrokerError(
                f"{self.name}: rabbitmqctl eval mnesia:sync_log() failed "
                f"(exit {done.returncode}): {(done.stdout + done.stderr).strip()[-400:]}"
            )

    def _amqp_address(self, destination: str) -> str:
        if destination.startswith("/queue/"):
            queue = destination.removeprefix("/queue/")
            self.declare_queue(queue)
            return f"/amq/queue/{queue}"
        return destination


class _Epmd:
    """A private Erlang port mapper on loopback for the nodes of one cluster."""

    def __init__(self, base_dir: Path, port: int) -> None:
        epmd = shutil.which("epmd") or "epmd"
        self.port = port
        self.process = ManagedProcess(
            "epmd",
            [epmd, "-address", HOST, "-port", str(port)],
            base_dir / "epmd.log",
        )

    def start(self, timeout: float = 10.0) -> None:
        self.process.spawn()

        taken: list[Ownership] = []

        def listens() -> bool:
            owner = port_owner(self.port, self.process.group_pids())
            if owner.state is PortState.FOREIGN:
                taken.append(owner)
                return False
            if owner.state is PortState.UNKNOWN:
                return tcp_accepts(HOST, self.port, 0.5)
            return owner.state is PortState.OURS

        def stopped() -> str | None:
            if taken:
                return "port taken"
            code = self.process.exit_code()
            return None if code is None else f"epmd exited with status {code}"

        # Bounded poll: epmd gives no other sign that it listens.
        reason = wait_until(listens, Deadline(timeout), give_up=stopped)
        if taken:
            self.process.kill()
            raise PortTakenError(
                "epmd", self.port, taken[0].holder, self.process.log_path.read_text()
            )
        if reason is not None:
            raise BrokerStartError("epmd", reason, self.process.log_path.read_text())

    def stop(self) -> None:
        self.process.kill()


def build_rabbitmq_cluster(spec: ClusterSpec, root: Path) -> Cluster:
    """Create (not start) ``spec.size`` nodes and start their private epmd."""
    reason = rabbitmq_missing()
    if reason is not None:
        raise BackendUnavailable(reason)
    root.mkdir(parents=True, exist_ok=True)
    per_node = 4 if spec.tls else 3
    ports = allocate_ports(1 + per_node * spec.size)
    epmd = _Epmd(root, ports[0])
    run = uuid.uuid4().hex[:8]  # node names unique per run, so no stale registration matters
    brokers = []
    for i in range(spec.size):
        mine = ports[1 + per_node * i : 1 + per_node * (i + 1)]
        amqp_port, stomp_port, dist_port = mine[:3]
        amqps_port = mine[3] if spec.tls else None
        name = f"{spec.label}-{i}"
        node = f"fc{run}{spec.label.replace('-', '')}{i}@localhost"
        brokers.append(
            LocalRabbitMQ(
                name,
                node,
                root / name,
                home=root,
                epmd_port=epmd.port,
                amqp_port=amqp_port,
                stomp_port=stomp_port,
                dist_port=dist_port,
                tls=spec.tls,
                amqps_port=amqps_port,
            )
        )
    epmd.start()
    return Cluster(spec, brokers, backend="local", cleanups=[epmd.stop])
