"""A full disk: a statement that runs out of space while it writes fails with an EngineError that says the disk is
full and what to do; once space is back the database opens, holds exactly what it held before (no partial rows, no
torn snapshot), and a retry of the statement writes each entry once. A disk that fills after the statement's commit
point (DuckDB's checkpoint, once the commit is durable) makes it an OutcomeUnknownError: the statement may or may
not have been written, and a retry with the same ids writes each entry once.

Two ways to fill a disk for real, picked at run time, and printed by the test (``SEQDEDUP_FULL_DISK=rlimit``
forces the second):

- ``tmpfs``: the database lives on a 16 MiB tmpfs mounted for the test, which a filler file then fills up to the
  last 192 KiB; the engine's write() gets ENOSPC. Space comes back when the filler is deleted. Needs permission to
  mount (root, or CAP_SYS_ADMIN).
- ``rlimit``: where mounting is not permitted, RLIMIT_FSIZE of the process that writes the files (this process for
  DuckDB; the Spark driver's JVM, through prlimit, for Spark) is lowered to a little above the largest file it may
  extend; a write past it gets EFBIG (Python and the JVM both ignore SIGXFSZ). Space comes back when the limit does.
"""
from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

import seqdedup
from seqdedup.errors import EngineError, OutcomeUnknownError
from seqdedup.failpoints import inject

from ..engines import spark_session
from .helpers import STATEMENT, dump, entries, rows, stage

MiB = 1 << 20
PAYLOAD = 2000          # bytes of each entry's payload (random hex: it does not compress)


class FullDisk:
    """A folder whose disk can be made full, and given space back (see the module's docstring)."""

    RESERVE = 192 * 1024    # tmpfs: the room the filler leaves

    def __init__(self, path: Path, force: str | None = None):
        self.path = path
        path.mkdir()
        self.mechanism, self.why = "rlimit", f"forced by SEQDEDUP_FULL_DISK={force}" if force else ""
        if force != "rlimit":
            try:
                mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(path)],
                                       capture_output=True, text=True)
                if mount.returncode == 0:
                    self.mechanism = "tmpfs"
                else:
                    self.why = f"mount refused: {(mount.stderr.strip().splitlines() or ['?'])[0]}"
            except OSError as error:
                self.why = f"mount failed: {error}"
        self.limited: tuple[int, tuple[int, int]] | None = None    # rlimit: (pid, its limit before)
        self.filler = path / "filler"

    def describe(self) -> str:
        if self.mechanism == "tmpfs":
            return f"tmpfs: a 16 MiB tmpfs at {self.path}, filled up to the last {self.RESERVE // 1024} KiB (ENOSPC)"
        return f"rlimit: RLIMIT_FSIZE on the writing process (EFBIG); no tmpfs because {self.why}"

    def needed(self, watched: list[Path]) -> int:
        """How many bytes a statement must write to run out of space once ``fill`` has run."""
        if self.mechanism == "tmpfs":
            return 2 * MiB
        return 2 * self._limit(watched)

    def _limit(self, watched: list[Path]) -> int:
        # above every file the process may extend while the statement runs (Derby's log files are 1 MiB)
        return max(4 * MiB, self._largest(watched) + MiB)

    @staticmethod
    def _largest(watched: list[Path]) -> int:
        return max((f.stat().st_size for d in watched for f in d.rglob("*") if f.is_file()), default=0)

    def fill(self, writer: int, watched: list[Path], *, grow: bool = True) -> None:
        """Leave no room: ``writer`` is the process that writes the database's files. ``grow`` false (rlimit): no
        file may grow past the largest one now, so that a file written anew fits and the largest cannot grow."""
        if self.mechanism == "tmpfs":
            stat = os.statvfs(self.path)
            left = stat.f_bavail * stat.f_frsize - self.RESERVE
            with open(self.filler, "wb") as filler:
                while left > 0:
                    left -= filler.write(b"\0" * min(MiB, left))
            return
        before = resource.prlimit(writer, resource.RLIMIT_FSIZE)
        limit = self._limit(watched) if grow else self._largest(watched)
        resource.prlimit(writer, resource.RLIMIT_FSIZE, (limit, before[1]))
        self.limited = (writer, before)

    def free(self) -> None:
        if self.filler.exists():
            self.filler.unlink()
        if self.limited:
            pid, before = self.limited
            resource.prlimit(pid, resource.RLIMIT_FSIZE, before)
            self.limited = None

    def close(self) -> None:
        self.free()
        if self.mechanism == "tmpfs" and subprocess.run(["umount", str(self.path)]).returncode:
            subprocess.run(["umount", "-l", str(self.path)])


@pytest.fixture
def disk(tmp_path):
    fault = FullDisk(tmp_path / "disk", os.environ.get("SEQDEDUP_FULL_DISK"))
    yield fault
    fault.close()


class Database:
    """A database in the folder ``disk.path``: a DuckDB file there, or a Spark namespace located there."""

    def __init__(self, engine: str, disk: FullDisk, spark_home: Path):
        self.engine, self.disk, self.home = engine, disk, spark_home
        if engine == "spark":
            self.spark = spark_session(str(spark_home))
            self.namespace = f"full_disk_{os.getpid()}_{id(self)}"
            location = disk.path / "namespace"
            self.spark.sql(f"CREATE DATABASE {self.namespace} LOCATION '{location}'")

    def connect(self):
        if self.engine == "spark":
            self.spark.sql(f"USE {self.namespace}")
            return seqdedup.connect(self.spark)
        return seqdedup.connect(str(self.disk.path / "seqdedup.duckdb"))

    def writer(self) -> tuple[int, list[Path]]:
        """The process that writes the files, and the folders of files it may extend."""
        if self.engine == "spark":
            return self.spark._jvm.java.lang.ProcessHandle.current().pid(), [self.home, self.disk.path]
        return os.getpid(), [self.disk.path]

    def checkpoint_every_commit(self, session) -> None:
        """DuckDB: the WAL written into the database file now, and at every commit from now on (a checkpoint, which
        DuckDB makes once the commit is durable in the WAL). Spark writes no file after a commit."""
        if self.engine != "spark":
            session.adapter.connection.execute("CHECKPOINT")
            session.adapter.connection.execute("SET checkpoint_threshold = '1KB'")

    def close(self) -> None:
        if self.engine == "spark":
            self.spark.sql(f"DROP DATABASE IF EXISTS {self.namespace} CASCADE")
            self.spark.sql("USE default")


def test_a_full_disk_fails_clearly_and_loses_nothing(engine, disk, tmp_path_factory, capsys):
    with capsys.disabled():
        print(f"\n[{engine.name}] full disk by {disk.describe()}")
    database = Database(engine.name, disk, tmp_path_factory.getbasetemp() / "spark-home")
    session = database.connect()
    try:
        session.create_topic("events", {"payload": "STRING"}, snapshot_interval_entries=3)
        stage(session, engine.name, rows(2, range(5)))
        assert session.sql(STATEMENT).written == 10           # a snapshot is due at its end: taken
        before = dump(session)

        writer, watched = database.writer()
        last = 5 + disk.needed(watched) // (2 * PAYLOAD) + 1   # ids 0..4 again (duplicates), then new ones
        big = rows(2, range(last), payload_bytes=PAYLOAD)
        stage(session, engine.name, big)
        disk.fill(writer, watched)
        with pytest.raises(EngineError, match="the disk is full") as full:
            session.sql(STATEMENT)
        assert "free space" in str(full.value) and "run the statement again" in str(full.value), full.value
        with capsys.disabled():
            print(f"[{engine.name}] {full.value}")

        disk.free()
        session.close()
        session = database.connect()                          # opens, and holds what it held before
        assert dump(session) == before
        stage(session, engine.name, big)
        assert session.sql(STATEMENT).written == 2 * (last - 5)
        expected = sorted((f"p{p}", s) for s in range(last) for p in range(2))
        assert sorted(entries(session)) == expected            # each entry once
        assert [(p, s) for p, s, _ in session.producer_state("events").rows] == [("p0", last - 1),
                                                                                  ("p1", last - 1)]
    finally:
        session.close()
        database.close()


#: Where the disk fills after a statement's commit point on each engine (the failpoint, seqdedup/failpoints.py), and
#: what the statement then raises (None: it returns its result).
AFTER_THE_COMMIT = {
    # DuckDB makes a commit durable in its WAL, then checkpoints the WAL into the database file, which must grow:
    # the checkpoint fails after the commit, DuckDB stops using the database, and the statement cannot know whether
    # its commit holds (it does: "Transaction COMMIT succeeded and is durable, but the autocheckpoint failed")
    "duckdb": ("before_publish", OutcomeUnknownError),
    # Spark's commit point is its publish, one metastore call; what follows it (removing the snapshots a full one
    # made unneeded) is logged when it fails, never raised: the statement returns, and says what it wrote
    "spark": ("after_publish", None),
}


def test_a_full_disk_after_the_commit_says_the_outcome_is_unknown_and_a_retry_writes_each_entry_once(
        engine, tmp_path, tmp_path_factory):
    at, raised = AFTER_THE_COMMIT[engine.family]
    disk = FullDisk(tmp_path / "disk", "rlimit")       # files may not grow: the largest cannot, a new one can
    database = Database(engine.name, disk, tmp_path_factory.getbasetemp() / "spark-home")
    session = database.connect()
    try:
        session.create_topic("events", {"payload": "STRING"})
        stage(session, engine.name, rows(2, range(300), payload_bytes=PAYLOAD))
        assert session.sql(STATEMENT).written == 600     # the database file: larger than the next commit's WAL
        database.checkpoint_every_commit(session)
        writer, watched = database.writer()
        more = rows(2, range(300, 500), payload_bytes=PAYLOAD)
        stage(session, engine.name, more)
        inject(at, lambda: disk.fill(writer, watched, grow=False))
        if raised is None:
            assert session.sql(STATEMENT).written == 400
        else:
            with pytest.raises(raised, match="the disk is full") as unknown:
                session.sql(STATEMENT)
            said = str(unknown.value)
            assert "the statement may or may not have been written" in said, said
            assert "connect again and retry the statement with the same producer names and sequence ids" in said
        disk.free()
        session.close()
        session = database.connect()
        stage(session, engine.name, more)               # the retry the error asks for
        session.sql(STATEMENT)
        assert sorted(entries(session)) == sorted((f"p{p}", s) for s in range(500) for p in range(2))
        assert [(p, s) for p, s, _ in session.producer_state("events").rows] == [("p0", 499), ("p1", 499)]
    finally:
        disk.free()
        session.close()
        database.close()
        disk.close()
