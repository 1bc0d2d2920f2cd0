"""The runs of the AMQP benchmark: brokers and queues, throughput, failover.

Each runner measures and returns plain data; ``bench_amqp.py`` turns it into tables and checks
it against the targets. The raw proton drivers are in ``_amqp_raw.py``, the chaos run in
``_amqp_chaos.py``.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, NoReturn
from urllib.parse import urlsplit

from benchmarks._amqp_raw import RawFailoverLoop, blocking_sends, container_burst
from benchmarks._common import EofProbe, log, summary_ms
from benchmarks._drivers import ProducerLoop
from failover_client import FailedOver, FailoverConnection
from failover_client.testing.brokers import Cluster

BODY = b"x" * 128
TRANSIENT = {"persistent": "false"}
CAP = 1000  # messages a throughput queue keeps (the oldest dropped beyond)


# -- brokers, queues, URIs ---------------------------------------------------------------------


def credentials(cluster: Cluster) -> tuple[str | None, str | None]:
    login, passcode = cluster[0].credentials or (None, None)
    return login, passcode


def amqp_uri(cluster: Cluster, indices: list[int] | None = None, options: str = "") -> str:
    members = []
    for i in indices if indices is not None else range(len(cluster)):
        broker = cluster[i]
        members.append(broker.uri("amqp") + (f"?vhost={broker.vhost}" if broker.vhost else ""))
    query = "randomize=false" + (f"&{options}" if options else "")
    return f"failover:({','.join(members)})?{query}"


def connection(cluster: Cluster, uri: str, **kwargs: Any) -> FailoverConnection:
    login, passcode = credentials(cluster)
    return FailoverConnection(uri, login=login, passcode=passcode, **kwargs)


def index_of_port(cluster: Cluster, port: int | None) -> int:
    for i, broker in enumerate(cluster):
        if broker.endpoint("amqp").port == port:
            return i
    raise KeyError(f"no node listens on AMQP port {port}")


def durable_queue(cluster: Cluster, label: str, cap: int | None = None) -> str:
    """Declare a durable queue on every node (its definition synced to disk); its name."""
    name = f"bench-amqp-{label}-{uuid.uuid4().hex[:8]}"
    for broker in cluster:
        if cap is None:
            broker.declare_queue(name)  # type: ignore[attr-defined]
        else:  # RabbitMQ takes queue arguments as STOMP SUBSCRIBE headers
            headers = {"durable": "true", "auto-delete": "false", "x-max-length": str(cap)}
            with broker.stomp_client() as session:
                session.unsubscribe(session.subscribe(f"/queue/{name}", headers=headers))
        broker.sync_definitions()  # type: ignore[attr-defined]
    return name


def drain_ids(cluster: Cluster, queue: str, idle: float = 1.0) -> list[str]:
    """Every ``bench-id`` left in ``queue`` on every running node (duplicates kept)."""
    found: list[str] = []
    for broker in cluster:
        if broker.running() and not broker.hung:
            for m in broker.drain(f"/queue/{queue}", timeout=300.0, idle=idle, protocol="amqp"):
                found.append(m.headers.get("bench-id") or m.body.decode(errors="replace"))
    return found


# -- throughput ------------------------------------------------------------------------------

Method = Callable[[int], float]  # run with a message count, return the seconds it took


def throughput_methods(
    cluster: Cluster, queue: str, fc: FailoverConnection
) -> dict[str, tuple[Method, int]]:
    url, address = cluster[0].uri("amqp"), f"/amq/queue/{queue}"
    user, password = credentials(cluster)

    def timed(run: Callable[[], None]) -> float:
        started = time.perf_counter()
        run()
        return time.perf_counter() - started

    def fc_window(n: int) -> float:
        def run() -> None:
            for _ in range(n):
                fc.send_async(address, BODY, TRANSIENT)
            fc.flush()

        return timed(run)

    def fc_blocking(n: int) -> float:
        return timed(lambda: [fc.send(address, BODY, TRANSIENT) for _ in range(n)] and None)

    def fc_unconfirmed(n: int) -> float:
        def run() -> None:
            for _ in range(n - 1):
                fc.send(address, BODY, TRANSIENT, confirm=False)
            fc.send(address, BODY, TRANSIENT)

        return timed(run)

    def auth(**kw: Any) -> dict[str, Any]:
        return {"user": user, "password": password, **kw}

    return {
        "raw Container, acceptance tracked": (
            lambda n: container_burst(url, address, n, **auth()),
            16000,
        ),
        "raw BlockingConnection, settlement awaited": (
            lambda n: blocking_sends(url, address, n, **auth()),
            3000,
        ),
        "failover send_async()+flush()": (fc_window, 16000),
        "failover send() (reference)": (fc_blocking, 3000),
        "raw Container, pre-settled": (
            lambda n: container_burst(url, address, n, **auth(presettled=True)),
            30000,
        ),
        "failover send(confirm=False)": (fc_unconfirmed, 30000),
    }


def run_throughput(cluster: Cluster, reps: int, scale: float) -> dict[str, Any]:
    """Every method ``reps`` times (A..Z Z..A, half the messages each way); rates in msg/s."""
    queue = durable_queue(cluster, "tp", cap=CAP)
    fc = connection(cluster, amqp_uri(cluster, [0]))
    fc.connect()
    try:
        table_of = throughput_methods(cluster, queue, fc)
        names = list(table_of)
        rates: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for rep in range(reps + 1):  # round 0 warms broker and client up, not recorded
            totals = {name: [0, 0.0, 0.0] for name in names}
            for half in (names, names[::-1]):
                for name in half:
                    method, base = table_of[name]
                    count = max(50, int(base * scale / 2))
                    # Every thread of this process (ours and proton's): the client's CPU.
                    cpu_before = time.process_time()
                    elapsed = method(count)
                    totals[name][2] += time.process_time() - cpu_before
                    totals[name][0] += count
                    totals[name][1] += elapsed
                    label = "warm-up" if rep == 0 else f"rep {rep}"
                    log(f"{label}: {name:44} {count:>6} msgs {count / elapsed:>9,.0f} msg/s")
            if rep > 0:
                for name, (count, elapsed, used) in totals.items():
                    rates[name].append(count / elapsed)
                    cpu[name].append(used / count * 1e6)
        stats = fc.stats()
    finally:
        fc.close()
    medians = {name: statistics.median(r) for name, r in rates.items()}
    return {
        "rates_msg_per_s": rates,
        "medians_msg_per_s": medians,
        "cpu_us_per_msg": cpu,
        "median_cpu_us_per_msg": {name: statistics.median(c) for name, c in cpu.items()},
        "client_stats": stats,
    }


# -- failover --------------------------------------------------------------------------------


SERIES_OPTIONS = {
    "failover": "",
    "failover delay=0": "initialReconnectDelay=0",
    "failover backup=true": "initialReconnectDelay=0&backup=true",
}
"""The URI options of each FailoverConnection series."""


class FailoverDriver:
    """``FailoverConnection.send`` (blocking until accepted) for ``ProducerLoop``."""

    def __init__(self, cluster: Cluster, options: str) -> None:
        self.cluster, self.failed_over = cluster, []
        self.conn = connection(cluster, amqp_uri(cluster, options=options), listeners=[self._on])

    def _on(self, event: object) -> None:
        if isinstance(event, FailedOver):
            self.failed_over.append(round(event.duration * 1000, 2))

    def send(self, destination: str, body: bytes, headers: dict[str, str]) -> int:
        self.conn.send(destination, body, headers, timeout=60.0)
        return index_of_port(self.cluster, urlsplit(self.conn.broker).port)


def _fail(message: str) -> NoReturn:
    raise RuntimeError(message)


def failover_series(cluster: Cluster, label: str, kills: int, settle: int) -> dict[str, Any]:
    """``kills`` rounds of SIGKILL / first acceptance elsewhere / restart, one producer."""
    queue = durable_queue(cluster, "fo")
    address, run = f"/amq/queue/{queue}", uuid.uuid4().hex[:6]
    prefix = f"{label.split(maxsplit=1)[0]}-{run}"
    driver: FailoverDriver | None = None
    loop: Any
    if label.startswith("failover"):
        driver = FailoverDriver(cluster, SERIES_OPTIONS[label])
        driver.conn.connect()
        loop = ProducerLoop(driver, address, prefix=prefix)  # type: ignore[arg-type]
    else:
        user, password = credentials(cluster)
        loop = RawFailoverLoop(
            [b.uri("amqp") for b in cluster],
            address,
            prefix,
            reconnect="backoff" if "Backoff" in label else "default",
            broker_of=lambda port: index_of_port(cluster, port),
            user=user,
            password=password,
        )
    loop.start()
    samples: list[float] = []
    eof: list[float] = []
    in_doubt: set[str] = set()
    error: str | None = None
    try:
        for n in range(kills):
            if not loop.wait_count(settle, timeout=60):
                _fail(f"producer stalled: {loop.error!r}")
            victim, sending = loop.last_broker, loop.sending_id
            endpoint = cluster[victim].endpoint("amqp")
            probe = EofProbe(endpoint.host, endpoint.port)
            t_kill = time.monotonic()
            cluster[victim].kill()
            switch = loop.first_switch_after(t_kill, victim, timeout=60.0)
            eof_at = probe.wait(5.0)
            probe.close()
            eof.append(eof_at - t_kill if eof_at is not None else float("nan"))
            if switch is None:
                _fail(f"no acceptance by another node within 60 s: {loop.error!r}")
            # In doubt: from the message being sent at the kill to the first one accepted
            # after it (the one in flight when the connection died is sent again).
            with loop.cond:
                first = int(loop.switch_ids[-1].rsplit("-", 1)[1])
            in_doubt.update(f"{prefix}-{i}" for i in range(sending, first + 1))
            samples.append(switch[0] - t_kill)
            log(
                f"{label:>34} kill {n + 1:>2}/{kills}: node {victim} -> {switch[1]} in "
                f"{samples[-1] * 1000:8.2f} ms (socket EOF after {eof[-1] * 1000:.2f} ms)"
            )
            loop.pause()
            cluster[victim].start()
            loop.resume()
    except Exception as exc:  # recorded; the other series still run
        error = f"{type(exc).__name__}: {exc}"
        log(f"{label}: ERROR {error}")
    finally:
        loop.stop()
        if driver:
            stats = driver.conn.stats()
            extra = {"replayed": stats.get("replayed"), "failed_over_ms": driver.failed_over}
            driver.conn.close()
        else:
            extra = {"resent": loop.resent}
        cluster.heal()
    confirmed = [i for ids in loop.all_confirmed().values() for i in ids]
    counts = Counter(drain_ids(cluster, queue))
    lost = sorted(set(confirmed) - counts.keys())
    duplicates = sorted(i for i, c in counts.items() if c > 1)
    return {
        "label": label,
        "options": SERIES_OPTIONS.get(label),
        "samples_ms": [round(s * 1000, 2) for s in samples],
        "eof_ms": [round(e * 1000, 2) for e in eof],
        "summary": summary_ms(samples),
        "eof_summary": summary_ms([e for e in eof if e == e]),
        "after_eof_summary": summary_ms(
            [s - e for s, e in zip(samples, eof, strict=False) if e == e]
        ),
        "confirmed": len(confirmed),
        "lost": len(lost),
        "lost_ids": lost[:20],
        "duplicates": sum(counts[i] - 1 for i in duplicates),
        "duplicate_ids": duplicates,
        "unexpected_duplicates": sorted(set(duplicates) - in_doubt),
        "client": extra,
        "error": error or (repr(loop.error) if loop.error else None),
    }


def merge_series(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One series from the blocks it was run in (see :func:`run_failover`)."""
    if len(parts) == 1:
        return parts[0]
    samples = [x / 1000 for p in parts for x in p["samples_ms"]]
    eof = [x / 1000 for p in parts for x in p["eof_ms"]]
    pairs = [(s, e) for s, e in zip(samples, eof, strict=False) if e == e]
    return {
        "label": parts[0]["label"],
        "options": parts[0]["options"],
        "blocks": len(parts),
        "samples_ms": [x for p in parts for x in p["samples_ms"]],
        "eof_ms": [x for p in parts for x in p["eof_ms"]],
        "summary": summary_ms(samples),
        "eof_summary": summary_ms([e for e in eof if e == e]),
        "after_eof_summary": summary_ms([s - e for s, e in pairs]),
        **{k: sum(p[k] for p in parts) for k in ("confirmed", "lost", "duplicates")},
        **{
            k: [x for p in parts for x in p[k]]
            for k in ("lost_ids", "duplicate_ids", "unexpected_duplicates")
        },
        "client": [p["client"] for p in parts],
        "error": next((p["error"] for p in parts if p["error"]), None),
    }


def run_failover(
    cluster: Cluster, kills: int, raw_kills: int, settle: int, blocks: int = 1
) -> list[dict[str, Any]]:
    """The failover series: FailoverConnection, raw proton twice, delay=0, standby.

    FailoverConnection, proton's default reconnect and ``delay=0`` run in ``blocks`` turns
    (their kills shared out, the order reversed every other turn), so a change in the
    machine's load falls on all three alike; ``Backoff()`` runs in one go (its point is that
    its delays grow over the kills of one connection), the standby series last.
    """
    turns = [
        ("failover", kills),
        ("raw proton default reconnect", raw_kills),
        ("failover delay=0", max(4, kills // 2)),
    ]
    parts: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in turns}
    for block in range(blocks):
        for label, n in turns if block % 2 == 0 else turns[::-1]:
            share = n // blocks + (1 if block < n % blocks else 0)
            if share:
                parts[label].append(failover_series(cluster, label, share, settle))
    return [
        merge_series(parts["failover"]),
        failover_series(cluster, "raw proton Backoff()", raw_kills, settle),
        merge_series(parts["raw proton default reconnect"]),
        merge_series(parts["failover delay=0"]),
        failover_series(cluster, "failover backup=true", max(4, kills // 2), settle),
    ]
