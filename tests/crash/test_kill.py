"""C14: kill -9 at any moment of a write leaves no partial rows and no torn snapshot, and a retry of the same
statement writes each entry exactly once. Real processes, really killed (the Spark driver JVM included).

One database per engine walks through a chain: statement i is killed at one point, the next process checks what
survived, retries statement i, and sends statement i+1 to be killed at the next point. The points are the steps of
a commit (seqdedup/failpoints.py) and, on Spark, two moments caught by watching the files: while the tasks write,
and during the job commit (the renames of a hundred files), the step a plain Spark INSERT is not atomic in.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from seqdedup.failpoints import STATEMENT

from ..positions import position_problem

CHILD = Path(__file__).with_name("child.py")
PRODUCERS = ["p0", "p1", "p2", "p3"]
NEW = 50                       # new ids per producer per statement
TIMED = ["during_write", "during_job_commit"]
TIMED_MISSES = 2               # statements a timed moment may finish in unseen before the test fails
#: Where each kill leaves the statement: published (True) or as if never run (False).
PUBLISHED = {"after_topic_rows": False, "after_run_log": False, "before_publish": False, "after_publish": True,
             "during_write": False, "during_job_commit": False}


def points(engine: str) -> list[str]:
    return list(STATEMENT) + (TIMED if engine == "spark" else [])


def statement(i: int, path: Path) -> Path:
    """Statement i: repeats of statement i-1's ids, then each producer's 50 new ids, then each new id again."""
    rows = [(p, s, "dup") for s in range((i - 1) * NEW, i * NEW) if i for p in PRODUCERS]
    rows += [(p, s, f"{p}-{s}") for s in range(i * NEW, (i + 1) * NEW) for p in PRODUCERS]
    rows += [(p, s, "dup") for s in range(i * NEW, (i + 1) * NEW) for p in PRODUCERS]
    table = pa.table({"producer": [r[0] for r in rows], "seq": [r[1] for r in rows],
                      "payload": [r[2] for r in rows], "arrival": list(range(len(rows)))})
    file = path / f"statement_{i}.parquet"
    pq.write_table(table, file)
    return file


def expected(applied: int) -> tuple[list[tuple], dict]:
    """Entries (producer, id, payload) and marks once statements 0 .. applied-1 are in."""
    entries = sorted((p, s, f"{p}-{s}") for s in range(applied * NEW) for p in PRODUCERS)
    return entries, ({p: applied * NEW - 1 for p in PRODUCERS} if applied else {})


def check(state: dict, applied: int, what: str) -> None:
    entries, marks = expected(applied)
    got = sorted(tuple(e[:3]) for e in state["entries"])
    assert len(got) == len(set(got)), f"{what}: an entry is in the topic twice"
    assert got == entries, f"{what}: the topic holds {len(got)} entries, expected {len(entries)} " \
                           f"(statements 0..{applied - 1})"
    problem = position_problem((e[4], e[3]) for e in state["entries"])
    assert problem is None, f"{what}: {problem}"
    assert state["marks"] == marks, f"{what}: marks {state['marks']} != {marks}"
    assert state["snapshot"]["position"] <= max([e[3] for e in state["entries"]], default=0), \
        f"{what}: the last snapshot is past the log's end"


class Child:
    def __init__(self, engine: str, database: str, env: dict, retry: Path | None, send: Path | None):
        command = [sys.executable, str(CHILD), engine, database]
        command += ["--retry", str(retry)] if retry else []
        command += ["--send", str(send)] if send else []
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, **env}, start_new_session=True)
        self.lines: dict[str, dict] = {}

    def read_until(self, step: str) -> dict:
        while step not in self.lines:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"the child ended before '{step}': {self.process.wait()} "
                                     f"{self.process.stderr.read()[-3000:]}")
            if line.startswith("{"):
                self.lines.update(json.loads(line))
        return self.lines[step]

    def finish(self) -> int:
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.update(json.loads(line))
        code = self.process.wait(timeout=600)
        self.stderr = self.process.stderr.read()
        return code

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)


def watch_and_kill(child: Child, staging: Path, moment: str) -> str | None:
    """Kill the child at ``moment`` of its next topic write; returns what the directory showed at the kill, or None
    when the child finished the write without the watcher seeing the moment (a loaded machine can keep this process
    off the CPU for the few milliseconds a job commit of a hundred renames takes)."""
    before = set(os.listdir(staging)) if staging.exists() else set()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.process.poll() is None:
        for name in (set(os.listdir(staging)) if staging.exists() else set()) - before:
            directory = staging / name
            final = [f for f in os.listdir(directory) if f.startswith("part-")] if directory.exists() else []
            if moment == "during_job_commit" and final and not (directory / "_SUCCESS").exists():
                child.kill()
                return f"{len(final)} files renamed into place, no _SUCCESS"
            if moment == "during_write" and not final and any(
                    f.startswith("part-") for _, _, files in os.walk(directory / "_temporary") for f in files):
                child.kill()
                return "task files under _temporary only"
        time.sleep(0.001)
    assert child.process.poll() is not None, f"the child wrote nothing for 10 minutes (waiting for {moment})"
    return None


def test_kill_9_at_every_step_then_retry(engine, tmp_path):
    engine = engine.name
    database = str(tmp_path / ("home" if engine == "spark" else "seqdedup.duckdb"))
    staging = tmp_path / "home" / "warehouse" / "events" / "_seqdedup_commits"

    # The first child creates the topic and sends statement 0 as if retrying it (a child per process start costs
    # seconds of JVM on Spark), then dies in statement 1 at the first step: one that creating a topic never reaches,
    # so the kill lands in the statement it is meant for.
    assert points(engine)[0] == "after_topic_rows"
    applied = 0          # statements 0 .. applied-1 are in
    killed = 0           # the statement the last child was killed in: the next child retries it first
    caught = {}
    for point in points(engine):
        # A timed moment the watcher misses lets the statement finish: it counts as sent, and the next child tries
        # the same moment with the next statement.
        for _ in range(1 + (TIMED_MISSES if point in TIMED else 0)):
            retry = statement(killed, tmp_path) if killed is not None else None
            env = {"MANY_FILES": "1"} if point in TIMED else {
                "SEQDEDUP_CRASH_AT": f"{point}:{2 if retry else 1}"}   # the retry passes the point once first
            sending = applied if killed is None else killed + 1
            child = Child(engine, database, env, retry, statement(sending, tmp_path))
            check(child.read_until("state"), applied, f"on opening, before the retry of statement {killed}")
            if retry:
                applied = sending
                check(child.read_until("retried"), applied, f"retry of statement {killed}")
            if point in TIMED:
                caught[point] = watch_and_kill(child, staging, point)
            code = child.finish()
            if caught.get(point, True) is None:
                assert code == 0, f"{point}: {child.stderr[-3000:]}"
                applied, killed = sending + 1, None
                check(child.lines["sent"], applied, f"statement {sending}, sent whole ({point} missed)")
                continue
            assert code == -signal.SIGKILL, f"{point}: the child was not killed ({code}): {child.stderr[-3000:]}"
            assert "sent" not in child.lines
            killed = sending
            applied += PUBLISHED[point]
            break
        else:
            raise AssertionError(f"never saw the moment {point} in {TIMED_MISSES + 1} statements")

    last = Child(engine, database, {}, statement(killed, tmp_path), None)
    assert last.finish() == 0, last.stderr[-3000:]
    check(last.lines["state"], applied, f"after the kill {point} in statement {killed}")
    check(last.lines["retried"], killed + 1, "the last retry")
    print(caught)
