"""The seed article's file example, killed for real: ``examples/publish_file.py`` publishes a file line by line
with each line's byte offset as its sequence id. It is killed with SIGKILL (its whole process group, the Spark driver
JVM included) at random moments several times, restarted after each kill, then left to finish: the topic must hold
every line of the file exactly once, at unique positions that increase in commit order.

Each kill is timed from the run's own progress (``--verbose`` prints a line where it resumes and one per send), so
it lands in the sending however long the engine takes to start, on a busy machine too: after a random number of
sends, a random part of a send's duration later, when the next send is in flight (or just done).
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..positions import position_problem

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "publish_file.py"
PRODUCER = "publish-file"       # the example's default name


def kill_in_flight(run, seen: list[float], rng: random.Random, i: int) -> None:
    """Kill run ``i`` a random part of its last step's duration after that step (``seen``: the times of its lines),
    while the next one is in flight (or just done)."""
    time.sleep(rng.uniform(0, 1) * (seen[-1] - seen[-2]))
    assert run.process.poll() is None, f"run {i} ended before its kill: {run.output()}"
    run.kill()
    assert run.process.wait(timeout=60) == -signal.SIGKILL


def stop(runs: list) -> None:
    """Kill what is left of ``runs`` (a test that failed midway)."""
    for run in runs:
        if run.process.poll() is None:
            run.kill()


@dataclass(frozen=True)
class Plan:
    lines: int                  # lines in the file
    batch: int                  # lines per send
    kills: int                  # kills that must land while the example runs
    sends: tuple[int, int]      # a kill comes after this many of the run's sends (at random, both ends included)


#: Spark starts a JVM and a Hive metastore per process (15-20 s, more on a busy machine) and a send takes seconds:
#: fewer, larger sends. Each killed run commits at most sends[1] + 1 sends, so no killed run can finish the file.
PLANS = {"duckdb": Plan(lines=300, batch=1, kills=5, sends=(1, 40)),
         "spark": Plan(lines=200, batch=20, kills=3, sends=(1, 2))}


def write_file(path: Path, lines: int, rng: random.Random) -> list[tuple[int, str]]:
    """A text file of ``lines`` lines (an empty one, multi-byte characters, no newline at the end); returns each
    line's (byte offset, text), as the topic should hold them."""
    words = ["alpha", "beta", "gamma", "delta", "café", "naïve", "✓", "日本"]
    records = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) + f" #{i}" for i in range(lines)]
    records[lines // 3] = ""
    data = "\n".join(records).encode("utf-8")
    path.write_bytes(data)
    offsets = [0] + [m.end() for m in re.finditer(b"\n", data)]
    return list(zip(offsets, records))


class Run:
    """One run of the example, in its own process group, its output in files."""

    def __init__(self, engine: str, database: Path, file: Path, batch: int, log: Path):
        self.out, self.err = log.with_suffix(".out"), log.with_suffix(".err")
        command = [sys.executable, str(EXAMPLE), str(file), "--database", str(database), "--engine", engine,
                   "--batch", str(batch), "--producer", PRODUCER, "--verbose"]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err, cwd=log.parent, start_new_session=True)

    def output(self) -> str:
        return self.out.read_text() + self.err.read_text()[-3000:]

    def wait_for_lines(self, count: int, timeout: float = 600) -> list[float]:
        """Wait until the run has printed ``count`` lines; when each appeared (as seen by polling)."""
        seen: list[float] = []
        deadline = time.monotonic() + timeout
        while len(seen) < count:
            assert self.process.poll() is None and time.monotonic() < deadline, (
                f"the run ended or stalled after {len(seen)} of {count} lines: {self.output()}")
            lines = self.out.read_text().count("\n")
            seen += [time.monotonic()] * (lines - len(seen))
            time.sleep(0.005)
        return seen

    def finish(self, timeout: float = 600) -> str:
        code = self.process.wait(timeout=timeout)
        assert code == 0, f"{self.out.name} exited with {code}: {self.output()}"
        return self.out.read_text()

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)


def topic_rows(engine: str, database: Path) -> list[list]:
    """The topic's rows, read by the seqdedup command line in a process of its own."""
    query = "SELECT `offset`, record, _position, _producer, _sequence_id, _commit FROM records"
    done = subprocess.run([sys.executable, "-m", "seqdedup", "sql", query, "--engine", engine, "--database",
                           str(database), "--json"], capture_output=True, text=True, cwd=database.parent,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["rows"]


def test_kill_9_the_file_publisher_at_random_moments_and_every_line_is_published_once(engine, tmp_path):
    engine, plan, rng = engine.name, PLANS[engine.name], random.Random(20180220)
    database = tmp_path / ("home" if engine == "spark" else "records.duckdb")
    file = tmp_path / "records.txt"
    expected = write_file(file, plan.lines, rng)

    runs: list[Run] = []
    try:
        for i in range(plan.kills):
            run = Run(engine, database, file, plan.batch, tmp_path / f"killed_{i}")
            runs.append(run)
            sends = rng.randint(*plan.sends)
            seen = run.wait_for_lines(1 + sends)            # where it resumed, then that many sends
            kill_in_flight(run, seen, rng, i)
        last = Run(engine, database, file, plan.batch, tmp_path / "last")
        runs.append(last)
        summary = last.finish().splitlines()[-1]
    finally:
        stop(runs)

    # each run resumed right after the last line committed before it: after the last send the killed run reported,
    # or after the one it was killed in, when that one had committed
    lines = [offset for offset, _ in expected] + [file.stat().st_size]     # where each line starts, and the end
    starts = [int(re.search(r"resum\w+ at byte (\d+)", run.out.read_text()).group(1)) for run in runs]
    assert starts[0] == 0
    for run, start in zip(runs, starts[1:]):
        reported = lines.index(int(re.findall(r"sent the lines at bytes \d+\.\.(\d+)", run.out.read_text())[-1]))
        after = [lines[min(reported + 1 + n, len(lines) - 1)] for n in (0, plan.batch)]
        assert start in after, f"resumed at byte {start}, expected one of {after}: {run.output()}"
    assert summary.endswith(f"last_sequence_id {expected[-1][0]}"), summary
    rows = topic_rows(engine, database)
    assert {producer for _, _, _, producer, _, _ in rows} == {PRODUCER}
    assert all(offset == sequence_id for offset, _, _, _, sequence_id, _ in rows)
    # every line exactly once: the same multiset of (offset, record) as the file
    assert Counter((offset, record) for offset, record, *_ in rows) == Counter(expected)
    assert position_problem((row[5], row[2]) for row in rows) is None
    print(f"{engine}: {plan.kills} kills; the runs resumed at bytes {starts} of {expected[-1][0]}")
