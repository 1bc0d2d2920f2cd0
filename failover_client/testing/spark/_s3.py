"""A real S3-compatible server on loopback, for tests of jobs that checkpoint on ``s3a://``.

moto's server (``moto[server]``, the ``test`` extra) speaks the S3 REST protocol over HTTP on
a free loopback port, in a thread of the test process: the driver, a restarted driver in a
child process and the executors all reach it at the same endpoint, as they would reach S3.
A job is pointed at it the way a user points a job at MinIO or any S3-compatible store: the
Hadoop ``fs.s3a.*`` settings in the session conf (:meth:`LoopbackS3.spark_conf`), or the AWS
environment variables (:meth:`LoopbackS3.environment`)::

    with LoopbackS3() as s3:
        s3.create_bucket("ck")
        spark = local_session(conf=s3.spark_conf())
        register(spark)
        ... .option("checkpointLocation", "s3a://ck/orders") ...

The keys are moto's test values (moto accepts any); nothing leaves the machine.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

__all__ = ["LoopbackS3"]

LOOPBACK = "127.0.0.1"
ACCESS_KEY = "failover-test-key"
SECRET_KEY = "failover-test-secret"  # noqa: S105 - a loopback test server accepts any key
REGION = "us-east-1"


class LoopbackS3:
    """moto's S3 server on a free loopback port (``start``/``stop``, or ``with``)."""

    def __init__(self) -> None:
        self._server: Any = None
        self.port = 0

    def start(self) -> LoopbackS3:
        from moto.server import ThreadedMotoServer  # noqa: PLC0415 - the test extra's package

        server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        server.start()  # returns once the server listens
        self._server = server
        self.port = int(server.get_host_and_port()[1])
        return self

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{LOOPBACK}:{self.port}"

    def client(self) -> Any:
        """A boto3 S3 client of this server."""
        import boto3  # type: ignore[import-untyped]  # noqa: PLC0415 - comes with moto

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name``; returns it."""
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """The keys under ``prefix`` in ``bucket``, sorted."""
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def spark_conf(self) -> dict[str, str]:
        """The Hadoop S3A settings a user would give a session for this server."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
        }

    def environment(self) -> dict[str, str]:
        """The standard AWS environment variables for this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> LoopbackS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LoopbackS3({self.endpoint if self._server is not None else 'stopped'})"
