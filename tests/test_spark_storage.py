"""Checkpoint locations: each scheme Spark users write mapped to a filesystem, or refused.

The S3 cases run against moto's S3 server on loopback (a real HTTP server speaking S3);
the others need no server. No Spark session.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyarrow import fs as pafs  # type: ignore[import-untyped]

from failover_client.spark import SparkOptionError, _s3conf, _storage
from failover_client.spark._fs import Location
from failover_client.spark._s3conf import S3Settings, from_conf, from_mapping
from failover_client.spark._spool import Spool, read_batch
from failover_client.spark._storage import absolute, resolve
from failover_client.testing.spark import LoopbackS3
from tests.spool_support import SpooledMessage, table_of

IDENTITY = {"destinations": ["/queue/in"], "selector": None}


def refused(location: str, s3: S3Settings | None = None) -> str:
    with pytest.raises(SparkOptionError) as caught:
        resolve(location, s3)
    assert caught.value.option == "checkpointLocation"
    text = str(caught.value)
    assert len(text.splitlines()) == 1, text
    return text


# --- local paths --------------------------------------------------------------------------------


def test_a_plain_or_relative_path_is_local_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = resolve("ck/orders")
    assert isinstance(resolved.filesystem, pafs.LocalFileSystem)
    assert resolved.path == str(tmp_path / "ck" / "orders")
    assert absolute("ck") == str(tmp_path / "ck")
    assert resolve(str(tmp_path)).path == str(tmp_path)


@pytest.mark.parametrize("form", ["file:{p}", "file://{p}", "file://localhost{p}"])
def test_file_urls_are_local(form: str, tmp_path: Path) -> None:
    resolved = resolve(form.format(p=tmp_path))
    assert isinstance(resolved.filesystem, pafs.LocalFileSystem)
    assert resolved.path == str(tmp_path)


def test_a_file_url_naming_another_host_is_refused() -> None:
    assert "names host 'nas'" in refused("file://nas/ck")


def test_dbfs_outside_databricks_is_refused_and_writes_nothing_locally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_storage, "DBFS_MOUNT", str(tmp_path / "no-such-mount"))
    text = refused("dbfs:/ck")
    assert "'dbfs:/ck'" in text
    assert "mount" in text
    with pytest.raises(SparkOptionError):
        Spool.open("dbfs:/ck", IDENTITY)
    assert os.listdir(tmp_path) == []  # never ./dbfs:/ck


def test_dbfs_is_databricks_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mount = tmp_path / "dbfs"
    mount.mkdir()
    monkeypatch.setattr(_storage, "DBFS_MOUNT", str(mount))
    assert resolve("dbfs:/ck/orders").path == f"{mount}/ck/orders"
    Location("dbfs:/ck").write_bytes("marker", b"1")
    assert (mount / "ck" / "marker").read_bytes() == b"1"
    assert "no host part" in refused("dbfs://ws/ck")


# --- schemes without their package, or not served -------------------------------------------------


def test_an_unknown_scheme_names_itself_and_what_works() -> None:
    text = refused("ftp://host/ck")
    assert "scheme ftp: is not served" in text
    for served in ("dbfs:/", "s3a://", "abfss://", "gs://", "hdfs://"):
        assert served in text


def _without(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == package else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize(
    ("location", "package", "install"),
    [
        ("gs://bucket/ck", "gcsfs", "pip install 'gcsfs'"),
        ("abfss://c@acct.dfs.core.windows.net/ck", "adlfs", "pip install 'adlfs'"),
        ("wasbs://c@acct.blob.core.windows.net/ck", "adlfs", "pip install 'adlfs'"),
        ("s3a://bucket/ck", "s3fs", "pip install 'failover-client[spark-cloud]'"),
    ],
)
def test_a_scheme_whose_package_is_missing_names_the_package(
    location: str, package: str, install: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, package)
    text = refused(location)
    assert f"needs the {package} package" in text
    assert install in text


def test_an_azure_url_without_container_and_account_shows_the_form() -> None:
    assert "abfss://container@account.dfs.core.windows.net/path" in refused("abfss://acct/ck")


def test_hdfs_without_libhdfs_is_one_short_line() -> None:
    if os.environ.get("ARROW_LIBHDFS_DIR") or os.environ.get("HADOOP_HOME"):
        pytest.skip("this machine has Hadoop's libhdfs")  # the error case needs its absence
    text = refused("hdfs://namenode:8020/ck")
    assert "libhdfs" in text


# --- S3 ---------------------------------------------------------------------------------------


def test_s3_schemes_map_to_s3fs_with_bucket_and_key() -> None:
    for scheme in ("s3a", "s3", "s3n"):
        resolved = resolve(f"{scheme}://bucket/ck/orders/", S3Settings())
        assert resolved.path == "bucket/ck/orders"
        assert resolved.object_store
        assert type(resolved.filesystem.handler.fs).__name__ == "S3FileSystem"
    assert "no bucket" in refused("s3a:///ck")


def test_keys_in_an_s3_url_are_refused_and_not_repeated() -> None:
    text = refused("s3a://AKIAEXAMPLE:wJalrSECRET@bucket/ck")
    assert "wJalrSECRET" not in text
    assert "spark.hadoop.fs.s3a.access.key" in text


def test_hadoop_s3a_settings_are_read_as_s3a_reads_them() -> None:
    settings = from_mapping(
        {
            "spark.hadoop.fs.s3a.endpoint": "minio.local:9000",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": "AKIAEXAMPLE",
            "spark.hadoop.fs.s3a.secret.key": "wJalrSECRET",
            "spark.hadoop.fs.s3a.path.style.access": "TRUE",
            "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        }
    )
    assert settings.endpoint_url == "http://minio.local:9000"
    assert settings.path_style
    kwargs = settings.s3fs_kwargs()
    assert kwargs["key"] == "AKIAEXAMPLE"
    assert kwargs["secret"] == "wJalrSECRET"
    assert kwargs["client_kwargs"] == {"region_name": "eu-west-1"}
    assert kwargs["config_kwargs"] == {"s3": {"addressing_style": "path"}}
    assert "wJalrSECRET" not in repr(settings)
    assert "AKIAEXAMPLE" not in repr(settings)
    # Hadoop's default: TLS unless switched off.
    assert from_conf({"fs.s3a.endpoint": "s3.example:443"}.get).endpoint_url == (
        "https://s3.example:443"
    )
    assert not from_mapping({})
    assert from_mapping({}).s3fs_kwargs() == {}


@pytest.fixture(scope="module")
def s3() -> Iterator[LoopbackS3]:
    with LoopbackS3() as server:
        server.create_bucket("bucket")
        yield server


def settings_of(server: LoopbackS3) -> S3Settings:
    return from_mapping(server.spark_conf())


def test_a_location_on_s3_reads_writes_lists_and_deletes(s3: LoopbackS3) -> None:
    place = Location("s3a://bucket/unit/location", settings_of(s3))
    assert place.names() == []
    assert not place.exists("a")
    place.write_bytes("a", b"first")
    place.child("sub").write_bytes("b", b"second")
    assert place.names() == ["a"]
    assert place.read_bytes("a") == b"first"
    assert s3.keys("bucket", "unit/location/") == ["unit/location/a", "unit/location/sub/b"]
    place.delete("a")
    place.delete("a")
    assert place.names() == []


def test_a_spool_on_s3_survives_a_new_process_view(s3: LoopbackS3) -> None:
    settings = settings_of(s3)
    spool = Spool.open("s3a://bucket/unit/ck", IDENTITY, s3=settings)
    messages = table_of(
        [
            SpooledMessage(f"m-{n}".encode(), {}, "/queue/in", f"id-{n}", None, False, None)
            for n in range(5)
        ]
    )
    spool.write(0, messages.slice(0, 3))
    spool.write(3, messages.slice(3))
    spool.commit(3, lambda batch: None)
    # A restarted driver: a new Spool object over the same location finds the same state.
    again = Spool.open("s3a://bucket/unit/ck", IDENTITY, s3=settings)
    state = again.state()
    assert (state.committed_end, state.position) == (3, 5)
    assert again.committed_ids(state.committed[0]) == ["id-0", "id-1", "id-2"]
    table = read_batch(again.url, state.batches[0].name, settings)
    assert table.column("body").to_pylist() == [b"m-3", b"m-4"]
    assert again.url == "s3a://bucket/unit/ck/failover-source"


def test_a_location_uses_the_settings_the_data_source_brought(
    s3: LoopbackS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_s3conf, "_process_settings", None)
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    _s3conf.use(settings_of(s3))
    Location("s3a://bucket/unit/current").write_bytes("x", b"1")
    assert s3.keys("bucket", "unit/current/") == ["unit/current/x"]


def test_the_aws_environment_is_enough(s3: LoopbackS3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_s3conf, "_process_settings", None)
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    Location("s3a://bucket/unit/env").write_bytes("y", b"2")
    assert s3.keys("bucket", "unit/env/") == ["unit/env/y"]
