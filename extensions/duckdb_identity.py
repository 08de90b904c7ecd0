"""Which database a DuckDB adapter is, however it was reached (R14 tells live producer names apart by it), and the
claim that keeps a database file open in this process through one path only."""
from __future__ import annotations

import os
import threading

from sqlglot import exp

from seqdedup.errors import EngineError

#: A one-row table that tells an in-memory database apart from another.
INSTANCE_MARKER = "seqdedup_instance"

#: Database files open in this process: identity -> (the path DuckDB opened it by, how many adapters use it).
_open_files: dict[str, tuple[str, int]] = {}
_files_lock = threading.Lock()


def identify(adapter) -> tuple[str, str | None]:
    """The database of ``adapter``: a file by its device and inode (two paths, a hard link, a second
    ``duckdb.connect`` or a cursor all name one file), an in-memory database by a marker written in it (every cursor
    of the connection shares it; another ``:memory:`` connection is another database). With it, the file's real path
    (None in memory), for ``claim``."""
    rows = adapter.fetchall("SELECT path FROM duckdb_databases() WHERE database_name = current_database()")
    path = rows[0][0] if rows else None
    if path and os.path.exists(path):
        status = os.stat(path)
        return f"duckdb:file:{status.st_dev}:{status.st_ino}", os.path.realpath(path)
    return f"duckdb:memory:{_memory_marker(adapter)}", None


def claim(identity: str, path: str) -> None:
    """DuckDB shares one instance per path in a process; a second path to the same file (a hard link) opens a
    second instance that neither sees nor locks out the first one's writes, and both would write the file. So a file
    open in this process through one path is refused through another; ``release`` gives a claim back."""
    with _files_lock:
        opened = _open_files.get(identity)
        if opened and opened[0] != path and opened[1] > 0:
            raise EngineError(f"the database file {path} is already open in this process as {opened[0]} (the "
                              "same file: a hard link or a copy of the path); DuckDB would open it twice and the "
                              f"two would overwrite each other's writes: connect to {opened[0]}")
        _open_files[identity] = (path, (opened[1] if opened else 0) + 1)


def release(identity: str) -> None:
    with _files_lock:
        path, users = _open_files[identity]
        _open_files[identity] = (path, users - 1)


def _memory_marker(adapter) -> str:
    marker = exp.table_(INSTANCE_MARKER)
    if not adapter.columns(marker):
        adapter.execute(exp.Create(this=marker, kind="TABLE", exists=True, expression=exp.select(
            exp.alias_(exp.cast(exp.func("uuid"), "text"), "id"))))
    return adapter.fetchall(exp.select("id").from_(marker))[0][0]
