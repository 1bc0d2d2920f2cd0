"""The example programs, run as a user runs them, against a network of brokers that loses one.

``examples/producer.py`` and ``examples/consumer.py`` run as subprocesses on the same queue of
a three-broker ActiveMQ network (the brokers forward queued messages to wherever a consumer
is). The broker both use is SIGKILLed while they run, and restarted so what it stored can flow
on; the consumer must end up with every message the producer printed as confirmed. Both
programs must also end cleanly on Ctrl-C (SIGINT).

``examples/amqp_producer.py`` and ``examples/amqp_consumer.py`` do the same over AMQP 1.0 on
two RabbitMQ nodes. The nodes are independent (a message stays on the node it was sent to), so
there every confirmed message must be either printed by the consumer or still on a node when
the run is over.

``examples/test_app_failover.py`` is a user's own pytest test built on the shipped broker
fixtures; it runs here the way the README tells a user to run it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from failover_client.testing.brokers import Cluster
from integration.test_failover_common import SAFETY, durable_queue, failover_uri, queue_name

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
URI_OPTIONS: dict[str, str | int | float | bool] = {
    "randomize": False,
    "initialReconnectDelay": 10,
    "maxReconnectDelay": 1000,
}
COUNT = 300


class Program:
    """One example running as a subprocess, its output lines collected as they come."""

    def __init__(self, script: str, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.name = script
        self.process = subprocess.Popen(
            # -X faulthandler: a program that does not finish is sent SIGABRT, which then
            # prints every thread's stack to stderr for the report.
            [sys.executable, "-u", "-X", "faulthandler", str(EXAMPLES / script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.cond = threading.Condition()
        self.lines: list[str] = []
        self.stderr = ""
        self._readers = [
            threading.Thread(target=self._read_stdout, name=f"test-{script}-out", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"test-{script}-err", daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append("<eof>")
            self.cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def wait_for_line(self, pattern: str, count: int = 1, timeout: float = SAFETY) -> None:
        """Until ``count`` output lines match ``pattern``.

        Fails at EOF, or when ``timeout`` passes without one more matching line: a count of
        lines comes at the program's pace (and a loaded machine's), so the deadline bounds the
        silence, not the whole count.
        """
        regex = re.compile(pattern)

        def matches() -> int:
            return sum(1 for line in self.lines if regex.search(line))

        with self.cond:
            while (found := matches()) < count and "<eof>" not in self.lines:
                more = self.cond.wait_for(
                    lambda: matches() > found or "<eof>" in self.lines,
                    timeout,
                )
                if not more:
                    break
            found = matches()
        assert found >= count, (
            f"{self.name}: {found}/{count} lines like {pattern!r}\n{self.report()}"
        )

    def finish(self, timeout: float = SAFETY) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)  # the stacks, for the report
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            for reader in self._readers:  # stderr is read whole, at its end
                reader.join(5)
            raise AssertionError(f"{self.name} did not finish\n{self.report()}") from None
        for reader in self._readers:
            reader.join(SAFETY)
        return code

    def matching(self, pattern: str) -> list[re.Match[str]]:
        regex = re.compile(pattern)
        with self.cond:
            return [m for line in self.lines if (m := regex.search(line))]

    def report(self) -> str:
        with self.cond:
            tail = "\n".join(self.lines[-15:])
        return f"--- {self.name} stdout (tail) ---\n{tail}\n--- stderr ---\n{self.stderr[-8000:]}"

    def stop(self) -> None:
        """Kill it if still running; close the pipes once the readers reached their end."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join(SAFETY)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def programs() -> Iterator[list[Program]]:
    started: list[Program] = []
    yield started
    for program in started:
        program.stop()


def test_consumer_gets_everything_the_producer_confirmed_across_a_kill(
    activemq_network: Cluster, unique_queue: str, programs: list[Program]
) -> None:
    uri = failover_uri(activemq_network, URI_OPTIONS)
    consumer = Program("consumer.py", "--uri", uri, "--destination", unique_queue)
    programs.append(consumer)
    consumer.wait_for_line("^listening on")
    producer = Program(
        "producer.py", "--uri", uri, "--destination", unique_queue,
        "--count", str(COUNT), "--interval", "0.01",
    )  # fmt: skip
    programs.append(producer)
    producer.wait_for_line("^confirmed message", COUNT // 3)
    first = activemq_network[0]
    first.kill()
    producer.wait_for_line("^event: FailedOver")
    consumer.wait_for_line("^event: FailedOver")
    # Back up, the first broker forwards what it stored to where the consumer now is.
    first.start()
    assert producer.finish() == 0, producer.report()
    confirmed = {m.group(1) for m in producer.matching(r"^confirmed (message \d+)$")}
    assert len(confirmed) == COUNT
    consumer.wait_for_line(r"^received message \d+", COUNT)
    consumer.process.send_signal(signal.SIGINT)
    assert consumer.finish() == 0, consumer.report()
    received = {m.group(1) for m in consumer.matching(r"^received (message \d+) ")}
    assert confirmed <= received
    print(
        f"\nproducer: {producer.matching('^done')[0].string};"
        f" consumer duplicates: {len(consumer.matching('^duplicate'))}"
    )


@pytest.mark.parametrize("script", ["producer.py", "consumer.py"])
def test_examples_end_cleanly_on_ctrl_c(
    activemq_cluster: Cluster, unique_queue: str, programs: list[Program], script: str
) -> None:
    uri = failover_uri(activemq_cluster, URI_OPTIONS)
    args = ["--uri", uri, "--destination", unique_queue, "--count", "0"]
    if script == "producer.py":
        args += ["--interval", "0.02"]
    program = Program(script, *args)
    programs.append(program)
    program.wait_for_line("^confirmed message" if script == "producer.py" else "^listening on")
    program.process.send_signal(signal.SIGINT)
    assert program.finish() == 0, program.report()
    assert program.matching("^interrupted"), program.report()
    assert program.matching("^done: "), program.report()
    assert "Traceback" not in program.stderr, program.report()


def _amqp_arguments(cluster: Cluster, destination: str) -> tuple[list[str], dict[str, str]]:
    """The AMQP examples' arguments, and their environment (the passcode goes there)."""
    login, passcode = cluster[0].credentials or ("", "")
    uri = failover_uri(cluster, URI_OPTIONS, endpoint="amqp")
    args = ["--uri", uri, "--destination", destination, "--login", login]
    return args, {"BROKER_PASSCODE": passcode}


def test_amqp_examples_lose_nothing_confirmed_across_a_sigkill(
    rabbitmq_cluster: Cluster, programs: list[Program]
) -> None:
    # Declared durable on both nodes and synced to disk, so a killed node keeps it.
    queue = queue_name(durable_queue(rabbitmq_cluster))
    args, env = _amqp_arguments(rabbitmq_cluster, f"/amq/queue/{queue}")
    consumer = Program("amqp_consumer.py", *args, env=env)
    programs.append(consumer)
    consumer.wait_for_line("^listening on")
    producer = Program(
        "amqp_producer.py", *args, "--count", str(COUNT), "--batch", "5", "--interval", "0.05",
        env=env,
    )  # fmt: skip
    programs.append(producer)
    producer.wait_for_line("^confirmed message", COUNT // 3)
    consumer.wait_for_line(r"^received message \d+")
    first = rabbitmq_cluster[0]  # randomize=false: both programs are on it
    first.kill()
    producer.wait_for_line("^event: FailedOver")
    consumer.wait_for_line("^event: FailedOver")
    assert producer.finish() == 0, producer.report()
    confirmed = {m.group(1) for m in producer.matching(r"^confirmed (message \d+)$")}
    assert len(confirmed) == COUNT
    # The last message went to the second node after the failover, behind everything else
    # sent there: once the consumer printed it, it has had all that node will give it.
    consumer.wait_for_line(rf"^received message {COUNT - 1} ")
    consumer.process.send_signal(signal.SIGINT)
    assert consumer.finish() == 0, consumer.report()
    received = {m.group(1) for m in consumer.matching(r"^(?:received|duplicate) (message \d+) ")}
    # What the killed node held (confirmed, never read) is on its disk: start it and drain
    # both nodes with the harness's own AMQP client.
    first.start()
    left = {
        message.text
        for broker in rabbitmq_cluster
        for message in broker.drain(f"/queue/{queue}", timeout=SAFETY, idle=1.0, protocol="amqp")
    }
    assert not confirmed - received - left, sorted(confirmed - received - left)[:10]
    print(
        f"\nproducer: {producer.matching('^done')[0].string}; consumer printed {len(received)},"
        f" {len(left)} left on the nodes"
    )


@pytest.mark.parametrize("script", ["amqp_producer.py", "amqp_consumer.py"])
def test_amqp_examples_end_cleanly_on_ctrl_c(
    rabbitmq_cluster: Cluster, programs: list[Program], script: str
) -> None:
    queue = queue_name(durable_queue(rabbitmq_cluster))
    args, env = _amqp_arguments(rabbitmq_cluster, f"/amq/queue/{queue}")
    args += ["--count", "0"]
    if script == "amqp_producer.py":
        args += ["--interval", "0.02"]
    program = Program(script, *args, env=env)
    programs.append(program)
    program.wait_for_line("^confirmed message" if script == "amqp_producer.py" else "^listening on")
    program.process.send_signal(signal.SIGINT)
    assert program.finish() == 0, program.report()
    assert program.matching("^interrupted"), program.report()
    assert program.matching("^done: "), program.report()
    assert "Traceback" not in program.stderr, program.report()


def test_the_users_pytest_example_passes_with_the_shipped_fixtures(tmp_path: Path) -> None:
    # A subprocess, as a user runs it: a fresh pytest that finds the plugin by its entry point.
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--failover-brokers", "-p", "no:cacheprovider",
            f"--basetemp={tmp_path / 'base'}", "-q", str(EXAMPLES / "test_app_failover.py"),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def _readme_test_snippet() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Testing your application against real brokers", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the README lost its example test"
    return match.group(1)


def test_the_readme_example_test_passes_outside_this_repository(tmp_path: Path) -> None:
    # Run from a directory with no conftest and no ini file, as in a user's own project: the
    # plugin comes from the installed entry point and --failover-brokers alone switches it on.
    (tmp_path / "test_orders.py").write_text(_readme_test_snippet(), encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--failover-brokers", "-p", "no:cacheprovider",
            f"--basetemp={tmp_path / 'base'}", "-q", "test_orders.py",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
