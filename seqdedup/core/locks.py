"""One writer at a time per database (R14, C17), and a bounded wait for the others.

Two writers deciding against the same state would both accept the same new ids, and would both take the topic's
next commit number. So every write (a statement, a snapshot, a policy change, a consumer batch) runs under the
database's writer lock:

- inside a process, one re-entrant lock per database, shared by every session on it (every thread, every
  ``seqdedup.connect`` of the same DuckDB file or SparkSession), with the marks its uncommitted statement claims
  (R6: ``UNKNOWN`` to every session of the process);
- between processes, the engine's own lock: DuckDB locks its file for one process, and a local Spark session locks
  its home (embedded Derby admits one process). The adapters wait for those the same bounded time.

A writer that cannot get the lock within ``lock_timeout`` seconds gets an ``EngineError`` saying who holds it;
``None`` waits as long as it takes. Reads of committed state take no lock.

Example:
    >>> lock = WriterLock("db", timeout=0.05)
    >>> def other_thread(errors):
    ...     try:
    ...         with WriterLock("db", timeout=0.05):
    ...             pass
    ...     except EngineError as error:
    ...         errors.append(str(error))
    >>> errors = []
    >>> with lock:
    ...     with lock:                       # re-entrant: a statement inside a producer's send
    ...         thread = threading.Thread(target=other_thread, args=(errors,), name="other")
    ...         thread.start(); thread.join()
    >>> errors[0].split(";")[0]
    "another writer of db (thread 'MainThread' of this process) held it for more than lock_timeout=0.05 s"
"""
from __future__ import annotations

import threading

from seqdedup.errors import EngineError


class _Shared:
    """What every session on one database in this process shares."""

    def __init__(self) -> None:
        self.lock = threading.RLock()     # held by the one writer of the database in this process
        self.holder: str | None = None    # the name of the thread that holds it, for the loser's error
        self.owner: int | None = None     # that thread's ident
        self.depth = 0                    # how many times the holder has entered it
        self.pushed = None                # the database's PushedMarks (seqdedup.session), made by the first session


_shared: dict[str, _Shared] = {}
_registry_lock = threading.Lock()


def shared(identity: str) -> _Shared:
    """The lock and marks of the database ``identity`` (``EngineAdapter.identity``) in this process."""
    with _registry_lock:
        return _shared.setdefault(identity, _Shared())


class WriterLock:
    """The writer lock of one database, as one session uses it: ``with lock: ...`` waits at most ``timeout`` s."""

    def __init__(self, identity: str, timeout: float | None):
        self.identity = identity
        self.timeout = timeout
        self._shared = shared(identity)

    def __enter__(self) -> "WriterLock":
        shared_ = self._shared
        if not shared_.lock.acquire(timeout=-1 if self.timeout is None else self.timeout):
            raise EngineError(f"another writer of {self.identity} (thread {shared_.holder!r} of this process) held "
                              f"it for more than lock_timeout={self.timeout} s; one write runs at a time per "
                              "database: retry later, or connect with a longer lock_timeout")
        shared_.depth += 1
        shared_.holder, shared_.owner = threading.current_thread().name, threading.get_ident()
        return self

    def try_enter(self) -> bool:
        """Enter if no other thread holds the lock now (never waits); whether it did."""
        shared_ = self._shared
        if not shared_.lock.acquire(blocking=False):
            return False
        shared_.depth += 1
        shared_.holder, shared_.owner = threading.current_thread().name, threading.get_ident()
        return True

    def __exit__(self, *exc) -> None:
        shared_ = self._shared
        shared_.depth -= 1
        if not shared_.depth:
            shared_.holder = shared_.owner = None
        shared_.lock.release()

    def held(self) -> bool:
        """Whether this thread is the database's writer now."""
        return self._shared.owner == threading.get_ident()

