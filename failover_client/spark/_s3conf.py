"""S3 settings a Spark user already wrote down: Hadoop's ``fs.s3a.*`` keys in the session conf.

A job that checkpoints on ``s3a://`` has its endpoint, keys and path style in the session's
configuration (``spark.hadoop.fs.s3a.endpoint`` and friends, or ``core-site.xml``), where
Spark's own S3A connector reads them. The connector's spool is read and written from Python
(the driver's planner process, the executors' Python workers), which cannot ask the JVM, so
:func:`register <failover_client.spark.register>` reads these keys once on the driver and the
data source carries them, as :class:`S3Settings`, to every process that opens the spool.

What is not set here comes from the standard AWS chain of each process (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
``~/.aws``, an instance role), as in any boto-based program. Secrets never appear in a repr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HADOOP_KEYS", "S3Settings", "current", "from_conf", "from_session", "use"]

HADOOP_KEYS = (
    "fs.s3a.endpoint",
    "fs.s3a.endpoint.region",
    "fs.s3a.access.key",
    "fs.s3a.secret.key",
    "fs.s3a.session.token",
    "fs.s3a.path.style.access",
    "fs.s3a.connection.ssl.enabled",
)
"""The Hadoop S3A keys read (as ``spark.hadoop.<key>`` or ``<key>`` in Hadoop's conf)."""


@dataclass(frozen=True)
class S3Settings:
    """How to reach S3 (or an S3-compatible store): None means the AWS chain decides."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    path_style: bool = False

    def __bool__(self) -> bool:
        return self != S3Settings()

    def __repr__(self) -> str:
        keys = "set" if self.access_key else "from the AWS chain"
        return (
            f"S3Settings(endpoint_url={self.endpoint_url!r}, region={self.region!r}, "
            f"keys {keys}, path_style={self.path_style})"
        )

    def s3fs_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` (only what is set)."""
        kwargs: dict[str, Any] = {}
        if self.access_key is not None:
            kwargs["key"] = self.access_key
        if self.secret_key is not None:
            kwargs["secret"] = self.secret_key
        if self.session_token is not None:
            kwargs["token"] = self.session_token
        if self.endpoint_url is not None:
            kwargs["endpoint_url"] = self.endpoint_url
        if self.region is not None:
            kwargs["client_kwargs"] = {"region_name": self.region}
        if self.path_style:
            kwargs["config_kwargs"] = {"s3": {"addressing_style": "path"}}
        return kwargs


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def from_conf(get: Callable[[str], str | None]) -> S3Settings:
    """The settings in a Hadoop-style configuration; ``get(key)`` returns a ``fs.s3a.*`` value.

    An endpoint without a scheme (Hadoop accepts ``host:port``) gets ``https://``, or
    ``http://`` when ``fs.s3a.connection.ssl.enabled`` is false, as S3A does.
    """
    values = {key: (get(key) or "").strip() or None for key in HADOOP_KEYS}
    endpoint = values["fs.s3a.endpoint"]
    if endpoint is not None and "://" not in endpoint:
        secure = values["fs.s3a.connection.ssl.enabled"]
        scheme = "http" if secure is not None and not _true(secure) else "https"
        endpoint = f"{scheme}://{endpoint}"
    return S3Settings(
        endpoint_url=endpoint,
        region=values["fs.s3a.endpoint.region"],
        access_key=values["fs.s3a.access.key"],
        secret_key=values["fs.s3a.secret.key"],
        session_token=values["fs.s3a.session.token"],
        path_style=_true(values["fs.s3a.path.style.access"]),
    )


def from_mapping(conf: Mapping[str, str]) -> S3Settings:
    """The settings in ``conf``, keyed ``spark.hadoop.fs.s3a.*`` (a session's conf as a dict)."""
    return from_conf(lambda key: conf.get(f"spark.hadoop.{key}"))


def from_session(spark: Any) -> S3Settings:
    """The settings of a live SparkSession (classic or Spark Connect).

    Classic sessions are asked through Hadoop's configuration, which also holds what
    ``core-site.xml`` set; a Spark Connect client sees only the session conf.
    """
    hadoop = _hadoop_conf(spark)
    if hadoop is not None:
        return from_conf(lambda key: None if hadoop.get(key) is None else str(hadoop.get(key)))
    return from_conf(lambda key: spark.conf.get(f"spark.hadoop.{key}", None))


def _hadoop_conf(spark: Any) -> Any:
    """Hadoop's Configuration of a classic session through py4j; None under Spark Connect."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None  # a Connect client has no SparkContext
    return spark.sparkContext._jsc.hadoopConfiguration()


_process_settings: S3Settings | None = (
    None  # set by use(): what the registered data source brought here
)


def use(settings: S3Settings | None) -> None:
    """Make ``settings`` this process's default (the data source calls it when Spark builds
    its reader or writer in a driver-side Python worker)."""
    global _process_settings  # noqa: PLW0603 - one per process, as the data source is
    if settings is not None:
        _process_settings = settings


def current() -> S3Settings:
    """The settings :func:`use` set in this process (empty: the AWS chain decides)."""
    return _process_settings if _process_settings is not None else S3Settings()
