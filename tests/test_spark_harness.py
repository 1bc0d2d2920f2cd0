"""The shipped Spark test harness, without starting Spark: configuration and injected faults."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from failover_client.testing.spark import (
    LOCAL_MASTER,
    FailFirstAttempt,
    InjectedFailure,
    NullOnFirstAttempt,
    SparkSessions,
    StandaloneCluster,
    _faults,
    executor_pids,
    session_conf,
    spark_environment,
    spark_home,
)


def test_everything_runs_on_loopback_with_this_interpreter() -> None:
    env = spark_environment()
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["PYSPARK_PYTHON"] == sys.executable
    conf = session_conf({"spark.sql.shuffle.partitions": "4"})
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.sql.shuffle.partitions"] == "4"  # the caller's conf wins


def test_local_master_retries_failed_tasks() -> None:
    # local[N] alone never retries a task; local[N,F] allows F attempts, as a cluster does.
    assert LOCAL_MASTER == "local[2,4]"


def test_a_cluster_takes_its_ports_and_describes_its_sessions(tmp_path: Path) -> None:
    cluster = StandaloneCluster(tmp_path, workers=2, cores=1, executor_memory="384m")
    assert cluster.master_url.startswith("spark://127.0.0.1:")
    assert not cluster.running()
    conf = cluster.session_conf({"spark.task.maxFailures": "2"})
    assert conf["spark.executor.memory"] == "384m"
    assert conf["spark.cores.max"] == "2"
    assert conf["spark.task.maxFailures"] == "2"
    assert "stopped" in repr(cluster)
    cluster.stop()  # nothing started: nothing to do


def test_a_cluster_needs_a_worker(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        StandaloneCluster(tmp_path, workers=0)


def _process(proc: Path, pid: int, *argv: str) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_executors_are_found_by_their_application_only(tmp_path: Path) -> None:
    backend = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
    _process(tmp_path, 41, "java", "-cp", "x", backend, "--app-id", "app-1", "--cores", "1")
    _process(tmp_path, 7, "java", backend, "--executor-id", "1", "--app-id", "app-1")
    _process(tmp_path, 52, "java", backend, "--app-id", "app-10")  # another application
    _process(tmp_path, 60, "python", "-c", "--app-id app-1")  # not an executor
    _process(tmp_path, 61, "java", backend, "--app-id")  # cut short
    (tmp_path / "self").mkdir()  # not a pid
    (tmp_path / "99").mkdir()  # ended while listed: no cmdline any more
    assert executor_pids("app-1", tmp_path) == [7, 41]
    assert executor_pids("app-2", tmp_path) == []


def test_spark_home_is_the_installed_pyspark() -> None:
    assert (spark_home() / "bin" / "spark-class").exists()


def test_sessions_start_with_none_alive() -> None:
    sessions = SparkSessions()
    assert sessions.master is None
    sessions.stop()
    assert repr(sessions) == "SparkSessions(master=None)"


def test_faults_fire_at_their_value_on_the_first_attempt_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempt = {"first": True}
    monkeypatch.setattr(_faults, "_first_attempt", lambda: attempt["first"])
    fail, null = FailFirstAttempt("3"), NullOnFirstAttempt("3")
    assert [fail(v) for v in (1, 2)] == [1, 2]
    with pytest.raises(InjectedFailure, match="injected failure at '3'"):
        fail(3)
    assert [null(v) for v in ("2", "3")] == ["2", None]
    attempt["first"] = False  # the retry runs through
    assert (fail(3), null("3")) == (3, "3")


def test_faults_outside_a_task_never_fire() -> None:
    assert FailFirstAttempt("3")(3) == 3
    assert NullOnFirstAttempt("3")("3") == "3"
