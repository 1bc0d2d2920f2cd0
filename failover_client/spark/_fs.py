"""Files under a Spark checkpoint location, wherever it lives (local, HDFS, S3, ...).

A checkpoint location is a local path or a URL of any filesystem Spark can reach; the driver
that restarts a query may run on another host, so what the connector keeps there (the sink's
commit markers, the source's spool) goes through pyarrow's filesystems, which serve the same
kinds of locations: ``/abs/path``, ``file:/...``, ``hdfs://...``, ``s3://...``, ``gs://...``.
A relative path is taken relative to the driver's working directory, as Spark does.

Writes are atomic where the filesystem allows it (written to a temporary name, then moved), so
a reader never sees half a file; on object stores a move is a copy, which is still
all-or-nothing for a reader of the final name.
"""

from __future__ import annotations

import os
import uuid

# pyarrow ships no type information; everything from it is Any to mypy.
from pyarrow import fs as pafs  # type: ignore[import-untyped]

__all__ = ["Location"]


class Location:
    """A directory under which files are read and written by relative name."""

    def __init__(self, url: str) -> None:
        plain_path = "://" not in url and not url.startswith("file:")
        text = os.path.abspath(url) if plain_path else url
        self.url = url
        self._fs, self._root = pafs.FileSystem.from_uri(text)

    def child(self, name: str) -> Location:
        """The location of the sub-directory ``name``."""
        sub = Location.__new__(Location)
        sub.url = f"{self.url.rstrip('/')}/{name}"
        sub._fs, sub._root = self._fs, self._path(name)
        return sub

    def _path(self, name: str) -> str:
        return f"{self._root.rstrip('/')}/{name}" if name else self._root

    def exists(self, name: str) -> bool:
        info = self._fs.get_file_info(self._path(name))
        return bool(info.type != pafs.FileType.NotFound)

    def read_bytes(self, name: str) -> bytes:
        with self._fs.open_input_stream(self._path(name)) as stream:
            return bytes(stream.read())

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``name`` atomically (temporary file, then a move), creating directories."""
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
        return f"Location({self.url!r})"
