"""Concurrent writer processes on one database, on every engine (C17 across processes, R14): they take turns at the
engine's lock (DuckDB's file lock; the Spark home's lock, held for the life of the process since embedded Derby
admits one process), so every entry lands exactly once; a writer that waits longer than its ``lock_timeout`` gets a
clear error naming the process in the way, and changes nothing.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from . import c17

WRITER = Path(__file__).with_name("writer.py")
#: Entries per statement; a Spark process starts a JVM and its statements cost seconds, so it makes fewer.
SIZE = {"duckdb": 100, "spark": 500}


class Writer:
    def __init__(self, engine: str, database: str, name: str, lock_timeout: float, hold: float | None = None):
        command = [sys.executable, str(WRITER), engine, database, name, str(SIZE[engine]), str(lock_timeout)]
        command += ["--hold", str(hold)] if hold else []
        self.log = tempfile.TemporaryFile("w+")     # a pipe left unread fills, and the writer blocks on its logging
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                        start_new_session=True)
        self.lines: dict = {}
        self.sent: list = []

    def wait_for(self, key: str) -> None:
        while key not in self.lines:
            if not self._read():
                raise AssertionError(f"the writer ended before {key!r}: {self.process.wait()} "
                                     f"{self.log.seek(0) or self.log.read()[-3000:]}")

    def _read(self) -> bool:
        line = self.process.stdout.readline()
        if not line:
            return False
        if line.startswith("{"):
            item = json.loads(line)
            self.sent += [item["sent"]] if "sent" in item else []
            self.lines.update(item)
        return True

    def finish(self) -> int:
        while self._read():
            pass
        code = self.process.wait(timeout=900)
        self.log.seek(0)
        self.stderr = self.log.read()
        return code


def test_c17_writer_processes_take_turns_and_each_entry_lands_once(engine, tmp_path):
    database = str(tmp_path / ("home" if engine.family == "spark" else "seqdedup.duckdb"))
    a = Writer(engine.name, database, "a", lock_timeout=600, hold=3)      # keeps the database 3 s, then writes
    a.wait_for("opened")
    # a writer that will not wait long enough fails clearly, naming the process in the way, and writes nothing
    impatient = Writer(engine.name, database, "b", lock_timeout=0.2)
    assert impatient.finish() == 3, impatient.stderr[-3000:]
    assert f"in use by process {a.lines['opened']}" in impatient.lines["error"], impatient.lines
    assert "lock_timeout" in impatient.lines["error"] and "opened" not in impatient.lines
    # a writer that waits gets its turn, and every entry of both lands exactly once
    b = Writer(engine.name, database, "b", lock_timeout=600)
    for writer in (a, b):
        assert writer.finish() == 0, writer.stderr[-3000:]
    last = max((a, b), key=lambda w: w.lines["at"])
    assert [tuple(e) for e in last.lines["entries"]] == c17.EXPECTED       # each of the 1500 entries once
    written, duplicates = (sum(s[i] for w in (a, b) for s in w.sent) for i in (0, 1))
    assert (written, duplicates) == (1500, 500)
