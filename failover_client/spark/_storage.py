"""Which filesystem serves a checkpoint location: every scheme Spark users write, or a clear no.

The connector keeps files under the query's ``checkpointLocation`` (the source's spool, the
sink's commit markers), read and written from Python: the driver's planner process and the
executors' Python workers, none of which can use the JVM's Hadoop filesystems. So each
location a Spark user writes is mapped to a Python filesystem here:

============================================ ====================================================
location                                     served by
============================================ ====================================================
``/abs``, ``rel/ative``, ``file:/``, ``file:///`` the local filesystem (relative to the driver's
                                             working directory, made absolute at once)
``dbfs:/path``                               Databricks' mount of DBFS at ``/dbfs/path`` (on the
                                             driver and every executor of a Databricks cluster)
``s3a://``, ``s3://``, ``s3n://``            s3fs (the ``spark-cloud`` extra), with the session's
                                             ``fs.s3a.*`` settings and the AWS chain
``gs://``                                    gcsfs, when installed
``abfss://``, ``abfs://``, ``wasbs://``,     adlfs, when installed (``container@account.host``)
``wasb://``
``hdfs://``                                  pyarrow's HadoopFileSystem (needs libhdfs)
============================================ ====================================================

Anything else fails when the query starts, naming the scheme and what works; a location is
never silently taken as a local path (``dbfs:/ck`` once became ``./dbfs:/ck``). Errors show
the location with any ``user:password@`` masked.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# pyarrow ships no type information; everything from it is Any to mypy.
from pyarrow import fs as pafs  # type: ignore[import-untyped]

from failover_client.spark._options import SparkOptionError
from failover_client.spark._s3conf import S3Settings

__all__ = [
    "DBFS_MOUNT",
    "SERVED",
    "Resolved",
    "absolute",
    "check_location",
    "resolve",
]

DBFS_MOUNT = "/dbfs"
"""Where Databricks mounts DBFS on the driver and the executors."""

SERVED = (
    "a local path or file:, dbfs:/ (Databricks), s3a:// or s3://, gs:// (gcsfs), "
    "abfss:// or wasbs:// (adlfs), hdfs:// (libhdfs)"
)
"""What an error about an unserved location lists."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
_S3 = frozenset({"s3a", "s3", "s3n"})
_AZURE = frozenset({"abfss", "abfs", "wasbs", "wasb"})
_GCS = frozenset({"gs", "gcs"})


@dataclass(frozen=True)
class Resolved:
    """A location's filesystem (pyarrow's interface) and the path of the location on it."""

    filesystem: Any
    path: str
    object_store: bool
    """A store where a single write is already all-or-nothing for readers (no rename)."""


def masked(location: str) -> str:
    """``location`` without the password of a ``user:password@`` part."""
    return re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", location)


def _error(location: str, reason: str) -> SparkOptionError:
    return SparkOptionError(
        f"failover: checkpointLocation {masked(location)!r}: {reason}",
        option="checkpointLocation",
    )


def scheme_of(location: str) -> str | None:
    """The URL scheme of ``location`` (lower case), None for a plain path."""
    match = _SCHEME.match(location)
    return None if match is None else match[1].lower()


def absolute(location: str) -> str:
    """``location`` with a relative local path made absolute (executors run elsewhere)."""
    if scheme_of(location) is None:
        return os.path.abspath(location)
    return location


def check_location(location: str, s3: S3Settings | None = None) -> None:
    """Raise :class:`SparkOptionError` now if ``location`` cannot be served (query start)."""
    resolve(location, s3)


def resolve(location: str, s3: S3Settings | None = None) -> Resolved:
    """The filesystem serving ``location`` (see the module docstring), or SparkOptionError."""
    scheme = scheme_of(location)
    if scheme in (None, "file", "dbfs"):
        return Resolved(pafs.LocalFileSystem(), _local_path(location, scheme), False)
    if scheme in _S3:
        return _s3(location, s3 or S3Settings())
    if scheme in _GCS:
        return _fsspec(location, "gcsfs", "GCSFileSystem", {}, _bucket_path(location))
    if scheme in _AZURE:
        account, path = _azure_parts(location)
        return _fsspec(location, "adlfs", "AzureBlobFileSystem", {"account_name": account}, path)
    if scheme == "hdfs":
        return _hdfs(location)
    raise _error(location, f"scheme {scheme}: is not served; use {SERVED}")


def _local_path(location: str, scheme: str | None) -> str:
    if scheme is None:
        return os.path.abspath(location)
    return _file_path(location) if scheme == "file" else _dbfs_path(location)


def _file_path(location: str) -> str:
    parts = urlsplit(location)
    if parts.netloc not in ("", "localhost"):
        raise _error(location, f"file: URL names host {parts.netloc!r}; write file:///path")
    return os.path.abspath(parts.path) if parts.path else os.getcwd()


def _dbfs_path(location: str) -> str:
    parts = urlsplit(location)
    if parts.netloc:
        raise _error(location, "write dbfs:/path (DBFS has no host part)")
    if not os.path.isdir(DBFS_MOUNT):
        raise _error(
            location,
            f"dbfs:/ is served through Databricks' {DBFS_MOUNT} mount, and this machine has "
            f"no {DBFS_MOUNT}; outside Databricks use a local path, s3a://, gs://, abfss:// "
            "or hdfs://",
        )
    return f"{DBFS_MOUNT}/{parts.path.lstrip('/')}".rstrip("/")


def _bucket_path(location: str) -> str:
    parts = urlsplit(location)
    if not parts.hostname:
        raise _error(location, f"no bucket: write {parts.scheme}://bucket/path")
    return f"{parts.hostname}/{parts.path.lstrip('/')}".rstrip("/")


def _s3(location: str, settings: S3Settings) -> Resolved:
    if "@" in urlsplit(location).netloc:
        raise _error(
            location,
            "keys in the URL are not read; set spark.hadoop.fs.s3a.access.key / secret.key "
            "or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
        )
    return _fsspec(location, "s3fs", "S3FileSystem", _s3fs_kwargs(settings), _bucket_path(location))


def _s3fs_kwargs(settings: S3Settings) -> dict[str, Any]:
    kwargs = settings.s3fs_kwargs()
    # Fresh listings always: the spool's state is what the directory says, and another
    # process (a restarted driver) may have changed it since a cached listing. Instances are
    # cached (per settings, per process; fsspec drops them in a forked child): a new client
    # costs about 0.5 s, and an executor reads a spool file per partition.
    kwargs["use_listings_cache"] = False
    return kwargs


def _azure_parts(location: str) -> tuple[str, str]:
    """(account, container/path) of ``abfss://container@account.dfs.core.windows.net/path``."""
    parts = urlsplit(location)
    container, at, host = parts.netloc.partition("@")
    if not at or not container or not host:
        raise _error(
            location,
            f"write {parts.scheme}://container@account.dfs.core.windows.net/path",
        )
    account = host.split(".", 1)[0]
    return account, f"{container}/{parts.path.lstrip('/')}".rstrip("/")


def _fsspec(
    location: str, package: str, class_name: str, kwargs: dict[str, Any], path: str
) -> Resolved:
    if importlib.util.find_spec(package) is None:
        extra = "failover-client[spark-cloud]" if package == "s3fs" else package
        raise _error(
            location,
            f"scheme {scheme_of(location)}: needs the {package} package: pip install '{extra}'",
        )
    module = importlib.import_module(package)
    filesystem = getattr(module, class_name)(**kwargs)
    handler = pafs.FSSpecHandler(filesystem)
    return Resolved(pafs.PyFileSystem(handler), path, True)


def _hdfs(location: str) -> Resolved:
    try:
        filesystem, path = pafs.FileSystem.from_uri(location)
    except (OSError, ImportError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _error(
            location,
            "hdfs:// goes through pyarrow's HadoopFileSystem, which needs Hadoop's libhdfs "
            "(HADOOP_HOME, CLASSPATH=$(hadoop classpath --glob), ARROW_LIBHDFS_DIR): "
            f"{first}",
        ) from None
    return Resolved(filesystem, path, False)
