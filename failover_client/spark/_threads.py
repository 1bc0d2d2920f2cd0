"""``format("failover")`` from any Python thread of a session, not only the one that registered.

Spark looks a Python data source up in the *active* session of the JVM thread that runs the
lookup (``SparkSession.getActiveSession``, a thread-local), not in the session the reader or
writer belongs to. PySpark runs each Python thread's calls on a JVM thread of its own, and a
new one has no active session: a query started from a ``ThreadPoolExecutor`` failed with
``[DATA_SOURCE_NOT_FOUND]`` although the data source was registered with that very session.

:func:`visible_from_threads` makes ``format(name)`` on a classic reader or writer (batch and
streaming) set the reader's own session active in the calling thread first, for the names
registered through :func:`failover_client.spark.register` only; every other format goes through
PySpark untouched. Spark Connect readers and writers are left as they are (their server looks
names up in the client's session).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["visible_from_threads"]

_names: set[str] = set()
_lock = threading.Lock()
_patched = False


def _activate(owner: Any) -> None:
    spark: Any = getattr(owner, "_spark", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return  # not a classic session: nothing thread-local to set
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


def _wrapped(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def format(self: Any, source: str) -> Any:
        if isinstance(source, str) and source.lower() in _names:
            _activate(self)
        return original(self, source)

    format.__failover_wrapped__ = True  # type: ignore[attr-defined]
    return format


def visible_from_threads(name: str) -> None:
    """Make ``format(name)`` find the data source from every Python thread (idempotent)."""
    global _patched  # noqa: PLW0603 - PySpark's classes are process-wide too
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter  # noqa: PLC0415
    from pyspark.sql.streaming.readwriter import (  # noqa: PLC0415
        DataStreamReader,
        DataStreamWriter,
    )

    with _lock:
        _names.add(name.lower())
        if _patched:
            return
        for cls in (DataFrameReader, DataFrameWriter, DataStreamReader, DataStreamWriter):
            if not getattr(cls.format, "__failover_wrapped__", False):
                cls.format = _wrapped(cls.format)  # type: ignore[method-assign]
        _patched = True
