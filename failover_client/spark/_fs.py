"""Files under a Spark checkpoint location, wherever it lives (local, DBFS, S3, Azure, GCS, HDFS).

A checkpoint location is a local path or a URL of a filesystem Spark can reach; the driver
that restarts a query may run on another host, so what the connector keeps there (the sink's
commit markers, the source's spool) goes through the filesystem
:func:`~failover_client.spark._storage.resolve` maps the location to (pyarrow's, or an fsspec
one behind pyarrow's interface); a location it cannot serve is refused with the scheme named.
A relative path is taken relative to the driver's working directory, as Spark does.

Writes are atomic for readers: on a filesystem a file is written under a temporary name and
moved; on an object store a single PUT already shows all or nothing, so it is written in
place (a move there would be a copy and a delete).
"""

from __future__ import annotations

import uuid

# pyarrow ships no type information; everything from it is Any to mypy.
from pyarrow import fs as pafs  # type: ignore[import-untyped]

from failover_client.spark._s3conf import S3Settings, current
from failover_client.spark._storage import masked, resolve

__all__ = ["Location"]


class Location:
    """A directory under which files are read and written by relative name.

    ``s3`` is how to reach S3 for an ``s3a://`` location (default: what the registered data
    source brought into this process, else the AWS chain).
    """

    def __init__(self, url: str, s3: S3Settings | None = None) -> None:
        resolved = resolve(url, s3 if s3 is not None else current())
        self.url = url
        self._fs = resolved.filesystem
        self._root = resolved.path
        self._object_store = resolved.object_store

    def child(self, name: str) -> Location:
        """The location of the sub-directory ``name``."""
        sub = Location.__new__(Location)
        sub.url = f"{self.url.rstrip('/')}/{name}"
        sub._fs, sub._root = self._fs, self._path(name)
        sub._object_store = self._object_store
        return sub

    def _path(self, name: str) -> str:
        return f"{self._root.rstrip('/')}/{name}" if name else self._root

    def exists(self, name: str) -> bool:
        info = self._fs.get_file_info(self._path(name))
        return bool(info.type != pafs.FileType.NotFound)

    def read_bytes(self, name: str) -> bytes:
        with self._fs.open_input_stream(self._path(name)) as stream:
            return bytes(stream.read())

    def write_bytes(self, name: str, data: bytes | memoryview) -> None:
        """Write ``name`` atomically for readers, creating directories."""
        if self._object_store:
            with self._fs.open_output_stream(self._path(name)) as stream:
                stream.write(data)
            return
        self._fs.create_dir(self._root, recursive=True)
        temporary = self._path(f".{name}.{uuid.uuid4().hex}.tmp")
        with self._fs.open_output_stream(temporary) as stream:
            stream.write(data)
        self._fs.move(temporary, self._path(name))

    def names(self) -> list[str]:
        """Names of the files directly under this location (none if it does not exist)."""
        selector = pafs.FileSelector(self._root, allow_not_found=True, recursive=False)
        infos = self._fs.get_file_info(selector)
        return sorted(str(info.base_name) for info in infos if info.type == pafs.FileType.File)

    def delete(self, name: str) -> None:
        """Remove ``name`` (nothing happens if it is already gone)."""
        if self.exists(name):
            self._fs.delete_file(self._path(name))

    def __repr__(self) -> str:
        return f"Location({masked(self.url)!r})"
