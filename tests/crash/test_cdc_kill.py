"""The CDC example killed for real: ``examples/cdc/cdc.py`` ingests a file of Debezium change events (transactions
that share an LSN, LSNs past 2^63, a connector restart that replays, two servers on one slot) into a topic of
composite ids (R19), then applies the topic to a current state with the consumer's position in the same commit. It is
killed with SIGKILL (its whole process group, the Spark driver JVM included) at random moments of the ingest and of
the apply, restarted after each kill, then left to finish: the topic must hold each distinct (slot, lsn, event) once
(the copy that arrived first), the applied changes each entry once, and the current state must be what a replay of
the distinct events in id order gives.

Each kill is timed from the run's progress (``--verbose`` prints a line where each phase resumes and one per batch),
as in ``test_publish_file_kill.py``: after a random number of batches of the phase, a random part of a batch's
duration later. Each run must resume exactly after what the one before it committed: the ingest at the first line
whose id is above the slot's mark, the apply after its stored position.
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from seqdedup.catalog import ids

from ..positions import position_problem
from .test_publish_file_kill import Run, kill_in_flight, stop

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cdc" / "cdc.py"
SLOT = "debezium"       # the example's default producer name


@dataclass(frozen=True)
class Plan:
    events: int                         # changes of the source table (the file holds about 1.45 times as many lines)
    batch: int                          # lines per statement, entries per commit
    kills: tuple[tuple[str, int], ...]  # (phase, most batches of it a killed run reports; at random from 1)


#: A killed run commits at most the batches it reported and the one in flight, so that no killed run can finish its
#: phase: DuckDB's 290 lines are 29 batches (3 kills take at most 21) and its 200 changes 20 (2 kills take 14).
#: Spark starts a JVM and a Hive metastore per process (15-20 s, more on a busy machine) and a batch takes seconds:
#: 60 lines in 6 batches, 40 changes in 4: one kill in each phase (each takes at most 2), for CI's time.
PLANS = {"duckdb": Plan(events=200, batch=10, kills=(("ingest", 6),) * 3 + (("apply", 6),) * 2),
         "spark": Plan(events=40, batch=10, kills=(("ingest", 1), ("apply", 1)))}


class CdcRun(Run):
    """One run of the CDC example, in its own process group, its output in files."""

    def __init__(self, engine: str, database: Path, plan: Plan, log: Path):
        self.out, self.err = log.with_suffix(".out"), log.with_suffix(".err")
        command = [sys.executable, str(EXAMPLE), "--database", str(database), "--engine", engine,
                   "--events", str(plan.events), "--batch", str(plan.batch), "--slot", SLOT, "--verbose"]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err, cwd=log.parent, start_new_session=True)

    def phase_lines(self, phase: str) -> list[str]:
        return [line for line in self.out.read_text().splitlines() if line.startswith(f"{phase}:")]

    def wait_for_phase(self, phase: str, count: int, timeout: float = 600) -> list[float]:
        """Wait until the run has printed ``count`` lines of ``phase``; when each appeared (as seen by polling)."""
        seen: list[float] = []
        deadline = time.monotonic() + timeout
        while len(seen) < count:
            assert self.process.poll() is None and time.monotonic() < deadline, (
                f"the run ended or stalled after {len(seen)} of {count} {phase} lines: {self.output()}")
            seen += [time.monotonic()] * (len(self.phase_lines(phase)) - len(seen))
            time.sleep(0.005)
        return seen

    def ingest(self) -> tuple[int | None, list[int]]:
        """Where the ingest resumed (a ts_ms; None: nothing left) and the last ts_ms of each batch it reported."""
        lines = self.phase_lines("ingest")
        start = re.search(r"resuming at ts_ms (\d+)", lines[0])
        return (int(start.group(1)) if start else None,
                [int(m.group(1)) for m in re.finditer(r"sent the lines at ts_ms \d+\.\.(\d+)", "\n".join(lines))])

    def apply(self) -> tuple[int, list[int]]:
        """The position the apply resumed after, and the position each batch it reported went through."""
        lines = self.phase_lines("apply")
        return (int(re.search(r"resuming after position (\d+)", lines[0]).group(1)),
                [int(m.group(1)) for m in re.finditer(r"through (\d+)", "\n".join(lines[1:]))])


def read_events(file: Path) -> list[dict]:
    """The file's events in order of arrival, each as (id, op, account, balance, lsn, total_order, server, ts_ms)."""
    events = []
    for line in file.read_text().splitlines():
        e = json.loads(line)
        row = e["after"] or e["before"]
        lsn, total_order = e["source"]["lsn"], e["transaction"]["total_order"]
        events.append({"id": (lsn, total_order), "op": e["op"], "account": row["id"],
                       "balance": e["after"] and e["after"]["balance"], "lsn": lsn, "total_order": total_order,
                       "server": e["source"]["name"], "ts_ms": e["ts_ms"]})
    assert [e["ts_ms"] for e in events] == sorted({e["ts_ms"] for e in events}), "ts_ms must increase along the file"
    return events


def first_copies(events: list[dict]) -> dict[tuple, dict]:
    """Each distinct id's first copy in order of arrival (the one the topic must hold); every copy says the same."""
    first: dict[tuple, dict] = {}
    for event in events:
        kept = first.setdefault(event["id"], event)
        assert {k: kept[k] for k in ("op", "account", "balance")} == {k: event[k] for k in ("op", "account", "balance")}
    return first


def replay(changes: list[dict]) -> dict[int, int]:
    """The table's rows (id -> balance) after the changes, applied in id order."""
    table: dict[int, int] = {}
    for change in sorted(changes, key=lambda c: c["id"]):
        if change["op"] == "d":
            del table[change["account"]]
        else:
            table[change["account"]] = change["balance"]
    return table


def resume_point(events: list[dict], through: int) -> int | None:
    """Where the ingest resumes once the lines up to ts_ms ``through`` are committed: the first line whose id is
    above the highest id among them (None: none)."""
    mark = max((e["id"] for e in events if e["ts_ms"] <= through), default=None)
    return next((e["ts_ms"] for e in events if mark is None or e["id"] > mark), None)


def committed(points: list[int], begun_after: int, ends: list[int], batch: int) -> set[int]:
    """What a killed run can have committed through, of the ordered ``points`` (ts_ms of lines, or positions): the
    end of its last batch reported (with none, the point it began after), or of the next one, in which it was
    killed, had that one committed (the ``batch``-th point after it)."""
    before = ends[-1] if ends else begun_after
    return {before, points[min(points.index(before) + batch, len(points) - 1)]}


def check_resumes(runs: list[CdcRun], events: list[dict], positions: list[int], batch: int) -> None:
    """Each run resumed right after what the runs before it committed: the ingest at the first line above the mark,
    the apply after the stored position."""
    times = [0] + [e["ts_ms"] for e in events]         # (0: before the first line)
    for killed, after in zip(runs, runs[1:]):
        start, ends = killed.ingest()
        expected = {None} if start is None else {
            resume_point(events, t) for t in committed(times, times[times.index(start) - 1], ends, batch)}
        assert after.ingest()[0] in expected, f"the ingest resumed at {after.ingest()[0]}, not at one of {expected}: " \
                                              f"{killed.output()}"
    applying = [run for run in runs if run.phase_lines("apply")]
    assert applying[0].apply()[0] == 0
    for killed, after in zip(applying, applying[1:]):
        expected = committed([0] + positions, *killed.apply(), batch)
        assert after.apply()[0] in expected, f"the apply resumed after {after.apply()[0]}, not one of {expected}: " \
                                             f"{killed.output()}"


#: What the test reads back: the topic, the applied changes and the current state.
TABLES = {"account_changes": ["_producer", "_sequence_id", "op", "account", "balance", "lsn", "total_order", "server",
                              "ts_ms", "_position", "_commit"],
          "applied_changes": ["change_id", "position", "account", "op", "balance"],
          "accounts": ["id", "balance"]}


def read_back(engine: str, database: Path) -> dict[str, list[dict]]:
    """The rows of ``TABLES``, read by the seqdedup command line in a process of its own (one statement a table)."""
    queries = [f"SELECT {', '.join(columns)} FROM {table}" for table, columns in TABLES.items()]
    done = subprocess.run([sys.executable, "-m", "seqdedup", "sql", "; ".join(queries), "--engine", engine,
                           "--database", str(database), "--json"], capture_output=True, text=True,
                          cwd=database.parent, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {table: [dict(zip(columns, row)) for row in result["rows"]]
            for (table, columns), result in zip(TABLES.items(), json.loads(done.stdout))}


def test_kill_9_the_cdc_example_at_random_moments_and_each_change_lands_and_applies_once(engine, tmp_path):
    engine, plan, rng = engine.name, PLANS[engine.name], random.Random(f"cdc-{engine.name}")
    database = tmp_path / ("home" if engine == "spark" else "cdc.duckdb")

    runs: list[CdcRun] = []
    try:
        for i, (phase, most) in enumerate(plan.kills):
            run = CdcRun(engine, database, plan, tmp_path / f"killed_{i}")
            runs.append(run)
            seen = run.wait_for_phase(phase, 1 + rng.randint(1, most))     # where it resumed, then its batches
            kill_in_flight(run, seen, rng, i)
        last = CdcRun(engine, database, plan, tmp_path / "last")
        runs.append(last)
        summary = last.finish().splitlines()[-1]
    finally:
        stop(runs)

    events = read_events(tmp_path / "accounts.changes.jsonl")
    first = first_copies(events)
    assert any(lsn >= 2**63 for lsn, _ in first) and len(first) == plan.events < len(events)
    tables = read_back(engine, database)
    topic, applied, accounts = (tables[name] for name in TABLES)

    # the topic: each distinct id once, from its first copy, at positions that grow in commit order
    assert Counter((row["_producer"], ids.decoded(row["_sequence_id"])) for row in topic) == Counter(
        (SLOT, i) for i in first)
    shared = ("op", "account", "balance", "lsn", "total_order", "server", "ts_ms")
    for row in topic:
        event = first[ids.decoded(row["_sequence_id"])]
        assert {k: row[k] for k in shared} | {"lsn": int(row["lsn"])} == {k: event[k] for k in shared}
    assert position_problem((row["_commit"], row["_position"]) for row in topic) is None
    # the consumer: each entry applied once, and the current state is the replay of the distinct changes
    applied_once = sorted((r["change_id"], r["position"], r["account"], r["op"], r["balance"]) for r in applied)
    assert applied_once == sorted((r["_sequence_id"], r["_position"], r["account"], r["op"], r["balance"])
                                  for r in topic)
    assert {row["id"]: row["balance"] for row in accounts} == replay(list(first.values()))
    positions = sorted(row["_position"] for row in topic)
    check_resumes(runs, events, positions, plan.batch)
    assert f"through {positions[-1]}); accounts: {len(accounts)} rows" in summary, summary
    assert summary.endswith(f"last_sequence_id {max(first)}"), summary

    if engine == "duckdb":      # run again: nothing to send, nothing to apply (on Spark, a JVM's start more)
        again = CdcRun(engine, database, plan, tmp_path / "again").finish().splitlines()
        assert "nothing left to send" in again[0], again
        assert re.search(r"sent 0, wrote 0, .* applied 0 changes", again[-1]), again
    print(f"{engine}: kills {[phase for phase, _ in plan.kills]}; the ingest resumed at "
          f"{[run.ingest()[0] for run in runs]}, the apply after "
          f"{[run.apply()[0] for run in runs if run.phase_lines('apply')]}")
