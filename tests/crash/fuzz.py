"""Crash fuzzing: random producers and operations, ``kill -9`` of the writing process at a random moment, restart,
and a check of everything against the reference model.

    python -m tests.crash.fuzz --engine duckdb --iterations 1000 [--seed N] [--workdir DIR]   (from the repo root)

One *iteration* is one writer process (fuzz_child.py). It opens the database (recovering the state), reports what
it finds, retries the operation its predecessor had in flight, and runs a few more operations of the plan: sends
(single and batch entries, retransmits of old ids, repeats inside a statement, holes, disorder, entries that
straddle a producer's mark, invalid entries now and then), snapshots (with purges of idle producers: the clock
jumps past the inactivity timeout now and then), disable and enable, compactions (on demand, and by the topic's
policy inside statements). It is killed with SIGKILL (its whole process group: on Spark the driver JVM too) at a
random step of a commit (a failpoint: mid-statement, mid-snapshot, between a policy change and its snapshot,
mid-creation of the topic, mid-compaction), after a random delay (any moment: while
recovering, deciding, writing), or not at all.

The parent keeps the truth: the reference model (udfs/reference.py) fed with every operation known to have
committed. A violation is any of:
- the recovered database is neither the model without the operation that was in flight at the kill, nor the model
  with it: an acknowledged entry missing or there twice, an entry of a statement that did not commit, part of a
  statement, positions that are not unique or do not increase in commit order, or recovered marks (last snapshot + replay) that differ from the marks
  the model computes from the whole history; where the topic keeps a ledger of dropped entries (R16), a ledger
  whose rows are not the run log's duplicates;
- an acknowledged operation whose answer (entries written and dropped per producer, or the error) differs from
  the model's;
- a writer that fails in a way the plan did not ask for.
After a violation the run goes on with a new database, so a long run reports every violation it meets.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from seqdedup.errors import InvalidEntryError
from seqdedup.failpoints import NAMES, STATEMENT
from seqdedup.udfs import Entry, Policies, SequenceTracker
from seqdedup.sql.key_window import KEY_PREFIX
from seqdedup.udfs.key_window import producer_of
from seqdedup.udfs.reference import validate

from .. import jvm
from ..engines import DISTRIBUTED
from ..positions import position_problem
from .fuzz_child import KEYS, composite_id, integer_id

CHILD = Path(__file__).with_name("fuzz_child.py")
#: The share of runs whose topic takes composite ids (R19).
COMPOSITE = 0.3
#: The failpoints each operation passes (a snapshot's only when one is due; an invalid send's none of them).
PRUNE = ["before_prune", "during_prune"]          # a full snapshot's removal of the snapshots before it
POINTS = {
    "create": ["after_topic_table", "after_snapshot_rows", "before_publish", "after_publish"],
    "send": list(STATEMENT) + ["after_snapshot_rows"] + PRUNE,
    "snapshot": ["after_snapshot_rows", "before_publish", "after_publish"] + PRUNE,
    "disable": ["after_policy_rows", "after_snapshot_rows", "before_publish", "after_publish"] + PRUNE,
    "enable": ["after_policy_rows", "after_snapshot_rows", "before_publish", "after_publish"] + PRUNE,
    # Spark only: on DuckDB there is nothing to merge, and the writer is not killed at them
    "compact": ["compact_after_write", "compact_after_switch", "compact_after_drop"],
}
assert {name for names in POINTS.values() for name in names} <= set(NAMES)
#: Operations per writer process, at most: a Spark process costs seconds to start, so it does more per life.
PER_CHILD = {"duckdb": 6, "spark": 4}


# --- the plan ------------------------------------------------------------------------------------------------------

class Planner:
    """Random operations with the shapes that break deduplication, from one seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        # the policies added later (R16, R17) are drawn apart, so that a seed plans the same operations and kills as
        # before them (the short Spark form in CI is 4 writers: its kills depend on that plan)
        self.later = random.Random(rng.getstate()[1][0])
        self.keyed = random.Random(rng.getstate()[1][1])        # (the same: which sends go by key, R20)
        # (and whether the topic's ids are composite, R19: each id s sent as (FIRST + s // PART, s % PART), which
        # orders alike; such a topic has no batch entries nor keys)
        self.composite = random.Random(rng.getstate()[1][2]).random() < COMPOSITE
        # (and whether the key window is in entries too, R20; such a topic's keyed sends are of one entry, so that
        # the order of their positions is their arrival order: within a statement, the engines number each key apart)
        self.window = None if self.composite else random.Random(rng.getstate()[1][3]).choice([None, None, 2, 4])
        self.at = 0.0                                  # the clock of the next operation, seconds
        self.sent: dict[str, int] = {}                 # producer -> highest id it has used
        self.count = 0

    def policies(self) -> dict:
        r = self.rng
        return {"snapshot_interval_entries": r.choice([1, 2, 3, 5, 1000]),
                "snapshot_interval_seconds": r.choice([0, 60, 120]),
                "producer_inactivity_timeout": r.choice([1, 2, 360]),
                # increments and full snapshots, and their removal (a retention of a few minutes keeps some)
                "full_snapshot_interval": r.choice([1, 2, 3, 100]),
                "snapshot_retention_minutes": r.choice([0, 0, 3]),
                "run_log_retention_minutes": (retention := r.choice([1, 10080])),
                "dropped_retention_minutes": retention,
                # compactions inside statements too (of ten partitions at least: FACTOR)
                "compact_every_commits": r.choice([2, 5, 100]),
                # a ledger of dropped entries (R16), pruned with the run log: the two must agree (``observed``)
                "dropped_entries": self.later.choice(["keys", "rows"]),
                # holes recorded (R17); refused ones are not drawn: a refused statement passes none of the commit's
                # steps, where the writer is killed (tests/behaviour/test_gap_policy.py checks it writes nothing)
                "gap_policy": self.later.choice(["allow", "record"]),
                # payload conflicts (R18): every entry's payload is its own, so each dropped entry whose id the topic
                # holds is one; recorded in the ledger and the run log, or ignored
                "payload_conflicts": self.later.choice(["ignore", "record"]),
                **({"id_parts": 2} if self.composite else {}),
                **({"key_window_entries": self.window} if self.window else {})}

    def next(self) -> dict:
        r = self.rng
        self.count += 1
        self.at += r.choice([0, 0, 1, 5, 20, 45, 90, 200])       # jumps past a 1-minute timeout purge producers
        if self.count == 1:
            return {"kind": "create", "policies": self.policies(), "at": self.at}
        kind = r.choices(["send", "snapshot", "disable", "enable", "compact"], weights=[80, 8, 4, 8, 6])[0]
        if kind != "send":
            return {"kind": kind, "at": self.at}
        size = r.choice([1, 2, 3, 5, 8, 12]) if r.random() < 0.95 else 300
        entries = [self._entry(i) for i in range(size)]
        flaw = None
        if r.random() < 0.05:                                    # invalid input: the statement must change nothing
            entry = entries[r.randrange(size)]
            flaw = r.randrange(4)
            if flaw == 0:
                entry[0] = None                                  # no producer
            elif flaw == 1:
                entry[1] = None                                  # no sequence id
            elif flaw == 2 or self.composite:
                entry[1] = -3                                    # a negative id (a negative part)
            else:
                entry[2] = entry[1] - 1                          # highest below lowest
        send = {"kind": "send", "entries": entries, "ordered": r.random() < 0.7, "at": self.at}
        if self.keyed.random() < 0.15 and flaw in (None, 0) and not self.composite:
            # is_new(key) (R20): an entry's key is its producer and id, so a retransmit is a copy of its key (a NULL
            # producer: a NULL key). The model sees each key as the engines do: a producer whose only id is 0
            entries = entries[:1] if self.window else entries
            keys = [None if p is None else f"{p}-{s}" for p, s, _, _ in entries]
            send.update(keyed=keys, entries=[[producer_of(k), 0, None, e[3]] for k, e in zip(keys, entries)])
        return send

    def _entry(self, i: int) -> list:
        r = self.rng
        producer = f"p{r.randrange(5)}" if r.random() < 0.97 else f"new-{self.count}"
        top = self.sent.get(producer, -1)
        roll = r.random()
        if roll < 0.55 or top < 0:                     # the next ids, sometimes after a hole
            sequence_id = top + 1 + (r.randrange(3) if r.random() < 0.2 else 0)
        elif roll < 0.85:                              # a retransmit of an id already used
            sequence_id = r.randint(max(0, top - 6), top)
        else:                                          # disorder: a little ahead
            sequence_id = top + r.randint(1, 6)
        highest = None
        if r.random() < 0.25:                          # a batch entry, which may straddle the mark
            start = sequence_id - r.randint(0, 3) if r.random() < 0.3 else sequence_id
            sequence_id, highest = max(0, start), max(0, start) + r.randint(0, 4)
        self.sent[producer] = max(top, highest if highest is not None else sequence_id)
        return [producer, sequence_id, None if self.composite else highest, f"{self.count}:{i}"]


# --- the truth -----------------------------------------------------------------------------------------------------

class Model:
    """The reference model fed with every operation that committed; ``None`` before the topic is created."""

    def __init__(self) -> None:
        self.tracker: SequenceTracker | None = None
        self.composite = False          # the topic's ids are (FIRST + s // PART, s % PART) (R19)

    def apply(self, operation: dict) -> dict:
        """Apply one operation as the engine does; returns what its acknowledgement must say."""
        kind, at = operation["kind"], operation["at"]
        if kind == "create":
            if self.tracker is None:
                policies = dict(operation["policies"])
                self.composite = policies.pop("id_parts", None) is not None
                self.tracker = SequenceTracker(Policies(**policies), now=at)
            return {}
        tracker = self.tracker
        if kind == "send":
            entries = [Entry(p, composite_id(s) if self.composite else s, h, payload)
                       for p, s, h, payload in operation["entries"]]
            try:
                for index, entry in enumerate(entries):
                    validate(entry, index)
            except InvalidEntryError as error:
                return {"error": type(error).__name__}
            if tracker.enabled:                  # a statement purges idle producers first (R11, by the log too)
                tracker.purge_inactive(at, by_log=True)
            result = tracker.apply_statement(entries, now=at,
                                             order=list(range(len(entries))) if operation["ordered"] else None)
            producers = set(result.written) | set(result.duplicates)
            if operation.get("keyed") and tracker.enabled:
                self.keys_in_window()
            if operation.get("keyed"):           # (the keys' counts together, as the engines give them)
                return {"counts": {KEYS: [sum(result.written.values()), sum(result.duplicates.values())]}}
            return {"counts": {p: [result.written.get(p, 0), result.duplicates.get(p, 0)] for p in producers}}
        if kind == "snapshot":
            tracker.snapshot_now(at)        # (``Session.snapshot``: taken when anything changed, purge or not)
        elif kind == "disable" and tracker.enabled:
            tracker.disable(at)
        elif kind == "enable" and not tracker.enabled:
            tracker.enable(at)
        return {}

    def keys_in_window(self) -> None:
        """R20, a window in entries: the keys of the last N keyed entries keep their marks, the others leave (the
        engines keep the N highest marks, a key's mark the position it was written at)."""
        t = self.tracker
        window = t.policies.key_window_entries
        if window is None:
            return
        last = {e.producer: e.position for e in t.log
                if e.producer in t.persisted and e.producer.startswith(KEY_PREFIX)}
        for producer in sorted(last, key=last.get)[:max(0, len(last) - window)]:
            for marks in (t.persisted, t.pushed, t.last_publish):
                marks.pop(producer, None)

    def observed(self) -> dict:
        """What a recovered database must show: entries, marks, enabled."""
        t = self.tracker
        if t is None:
            return {"topic": False}
        as_sent = integer_id if self.composite else (lambda s: s)
        return {"topic": True,
                "entries": sorted((e.producer, as_sent(e.sequence_id), as_sent(e.highest_sequence_id), e.payload)
                                  for e in t.log),
                "marks": {p: as_sent(s) for p, s in t.state().items()} if t.enabled else {}, "enabled": t.enabled}


def observed(state: dict) -> tuple[dict, str | None]:
    """The comparable part of a child's state report, and a problem with the positions if there is one."""
    if not state["topic"]:
        return {"topic": False}, None
    problem = position_problem((row[5], row[4]) for row in state["entries"])
    ledger, dropped = state.get("ledger") or (0, 0)
    if ledger != dropped:       # R16: a ledger row per duplicate the run log counts, committed together
        problem = f"the ledger holds {ledger} dropped entries where the run log counts {dropped} duplicates"
    # a key's entry (R20) carries its position as its highest id, and the key's mark is its last entry's position
    # (sql/plan/common.py's insert_rows); the model's key is a producer whose only id is 0, its mark 0
    entries, marks, written_at = [], dict(state["marks"]), {}
    for producer, sequence_id, highest, payload, position, *_ in state["entries"]:
        if producer is not None and producer.startswith(KEY_PREFIX):
            if highest != position:
                problem = f"key {producer}'s entry at {position} carries {highest} as its highest id"
            highest, written_at[producer] = 0, max(position, written_at.get(producer, 0))
        entries.append((producer, sequence_id, highest, payload))
    for producer in set(marks) & set(written_at):
        if marks[producer] != written_at[producer]:
            problem = f"key {producer}'s mark is {marks[producer]}, not its last position {written_at[producer]}"
        marks[producer] = 0
    return {"topic": True, "entries": sorted(entries), "marks": marks, "enabled": state["enabled"]}, problem


def ties(operation: dict) -> dict[str, str]:
    """Without ORDER BY, entries equal in (producer, id, highest id) arrive in no particular order among themselves
    (docs/semantics.md), so which of them is written is the engine's choice: each payload of such a tie after the
    first -> the first's, for a comparison that does not depend on that choice."""
    if operation["kind"] != "send" or operation["ordered"]:
        return {}

    def key(entry: list) -> tuple:
        producer, sequence_id, highest, _ = entry
        return producer, sequence_id, sequence_id if highest is None else highest

    first: dict[tuple, str] = {}
    for entry in operation["entries"]:
        first.setdefault(key(entry), entry[3])
    return {entry[3]: first[key(entry)] for entry in operation["entries"] if first[key(entry)] != entry[3]}


def untied(view: dict, tied: dict[str, str]) -> dict:
    """``view`` (``observed``) with each tied payload replaced by its tie's first."""
    if not view.get("entries"):
        return view
    return {**view, "entries": sorted((*entry[:3], tied.get(entry[3], entry[3])) for entry in view["entries"])}


def difference(got: dict, want: dict) -> str:
    if got.get("topic") != want.get("topic"):
        return f"topic exists: {got.get('topic')} != {want.get('topic')}"
    parts = []
    if got["entries"] != want["entries"]:
        g, w = set(got["entries"]), set(want["entries"])
        twice = len(got["entries"]) - len(g)
        parts.append(f"entries: {len(got['entries'])} (twice: {twice}) vs {len(want['entries'])}; "
                     f"extra {sorted(g - w)[:5]}, missing {sorted(w - g)[:5]}")
    if got["marks"] != want["marks"]:
        parts.append(f"marks {got['marks']} != {want['marks']}")
    if got["enabled"] != want["enabled"]:
        parts.append(f"enabled {got['enabled']} != {want['enabled']}")
    return "; ".join(parts)


# --- the run -------------------------------------------------------------------------------------------------------

@dataclass
class Stats:
    iterations: int = 0
    kills: dict = field(default_factory=lambda: {"failpoint": 0, "timer": 0})
    operations: int = 0                  # acknowledged operations
    in_flight_committed: int = 0         # operations in flight at a kill that turned out committed
    violations: list = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def line(self, total: int) -> str:
        per = (time.monotonic() - self.started) / max(self.iterations, 1)
        return (f"iteration {self.iterations}/{total}: kills {sum(self.kills.values())} (failpoint "
                f"{self.kills['failpoint']}, timer {self.kills['timer']}), operations {self.operations}, "
                f"in flight and committed {self.in_flight_committed}, violations {len(self.violations)}, "
                f"{per:.1f} s/iteration")


class Fuzz:
    """One database under attack, and the model of what it must hold."""

    def __init__(self, engine: str, workdir: Path, rng: random.Random, stats: Stats, generation: int = 0,
                 alternate: bool = False):
        self.engine, self.workdir, self.rng, self.stats = engine, workdir, rng, stats
        # With ``alternate``, every other turn goes to one long-lived writer process (fuzz_child.py --serve) that
        # closes its session between turns while fresh processes write: it must not trust what it remembers.
        if alternate and engine == "spark":
            raise NotImplementedError("a local Spark home (embedded Derby) admits one process for the process's "
                                      "life, so a long-lived writer cannot take turns with others: that needs a "
                                      "shared metastore (tests/metastore.py)")
        self.alternate = alternate
        self.server: subprocess.Popen | None = None
        name = f"home-{generation}" if engine == "spark" else f"fuzz-{generation}.duckdb"
        self.database = str(workdir / name)
        self.planner = Planner(rng)
        self.operations: list[dict] = []
        self.tied: dict[str, str] = {}   # payloads written in a tie's place -> the tie's first (``ties``)
        self.model = Model()
        self.acked = 0                   # operations before this index are acknowledged and in the model
        self.pending: int | None = None  # an operation that may have committed before its writer was killed
        self.kill = "none"               # how the last writer was to die (a failpoint, "timer", "none"): for reports
        self.killed_by = "none"          # ... and how the one before the current writer died
        # Seconds a writer takes to recover (from "started" to "state") and per operation, learnt as it goes: a
        # random kill is timed within them.
        self.startup, self.per_operation = {"duckdb": (0.3, 0.1), "spark": (20.0, 5.0)}[engine]

    def iteration(self, kill: bool = True) -> list[str]:
        """One writer process; returns the violations it revealed."""
        count = self.rng.randint(1, PER_CHILD[self.engine]) if kill else 0
        while len(self.operations) < self.acked + count:
            self.operations.append(self.planner.next())
            self.tied.update(ties(self.operations[-1]))
        plan = {"first": self.acked, "operations": self.operations[self.acked:self.acked + count],
                # half the writers decide as Spark decides large statements (adapter settings the child applies);
                # full snapshots prune at once, or a small state's in batches, as on Spark (its default: 16)
                "adapter": {**(DISTRIBUTED if self.rng.random() < 0.5 else {}),
                            "PRUNE_SPACING": self.rng.choice([1, 2, 16])}}
        # Kills alternate between a failpoint and a random moment; every tenth writer is left to finish.
        mode = ("none" if self.stats.iterations % 10 == 9 else ("failpoint", "timer")[self.stats.iterations % 2]) \
            if kill else "none"
        serving = self.alternate and self.stats.iterations % 2 == 1    # the long-lived writer's turn (killed at
        if serving:                                                     # random moments only: a failpoint would
            mode = "timer" if mode == "failpoint" else mode             # stay armed for its later turns)
            self.kill = mode
            child = self._serve(plan)
        else:
            env = {k: v for k, v in os.environ.items() if k != "SEQDEDUP_CRASH_AT"}
            if mode == "failpoint":
                env["SEQDEDUP_CRASH_AT"] = self._failpoint(plan["operations"])
            self.kill = env.get("SEQDEDUP_CRASH_AT", mode)
            path = self.workdir / "plan.json"
            path.write_text(json.dumps(plan))
            child = subprocess.Popen([sys.executable, str(CHILD), self.engine, self.database, str(path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)
        timer = None
        stderr: list[str] = []
        if not serving:
            reader = threading.Thread(target=lambda: stderr.append(child.stderr.read()), daemon=True)
            reader.start()
        violations, recovered, done, last = [], False, False, None

        def arm(window: float) -> threading.Timer:
            armed = threading.Timer(self.rng.uniform(0, window), _kill, [child])
            armed.start()
            return armed

        last = time.monotonic()
        for raw in child.stdout:
            # (a line without its newline is the start of one the writer was killed while writing: a long state
            # line passes the pipe's buffer and is written in pieces, the last never coming)
            if not raw.startswith("{") or not raw.endswith("\n"):
                continue
            line, now = json.loads(raw), time.monotonic()
            if "done" in line:
                done = True
                break
            if "started" in line:
                if mode == "timer" and timer is None and self.rng.random() < 0.3:   # a kill while it recovers
                    timer = arm(self.startup + self.per_operation * count)
            elif "state" in line:
                recovered = True
                self.startup = 0.7 * self.startup + 0.3 * (now - last)
                if mode == "timer" and timer is None:
                    timer = arm(self.per_operation * count)
                violations += self._recovered(line["state"])
            elif "ack" in line:
                self.per_operation = 0.7 * self.per_operation + 0.3 * (now - last)
                violations += self._acknowledged(line)
            last = now
            if violations:
                break
        if timer:
            timer.cancel()
        if violations:
            _kill(child)
        if serving and done and not violations:      # its turn is done; it lives on for the next one
            code = 0
        else:
            code = child.wait(timeout=900)
            if serving:
                self.server = None                # killed (or failed): the next turn starts a new one
            else:
                reader.join(timeout=60)
        killed = code == -signal.SIGKILL
        self.killed_by = self.kill if killed else "none"
        if killed:
            self.stats.kills["timer" if mode == "timer" else "failpoint"] += 1
            if recovered:                    # it may have begun the next operation
                self.pending = self.acked if self.acked < len(self.operations) else None
        elif code != 0 and not violations:
            violations.append(f"the writer failed (exit {code}): {''.join(stderr)[-2000:]}")
        elif not violations:
            self.pending = None
        self.stats.iterations += 1
        return violations

    def _serve(self, plan: dict) -> subprocess.Popen:
        """The long-lived writer (started when there is none), given its next turn."""
        if self.server is None or self.server.poll() is not None:
            env = {k: v for k, v in os.environ.items() if k != "SEQDEDUP_CRASH_AT"}
            self.server = subprocess.Popen([sys.executable, str(CHILD), self.engine, self.database, "--serve"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                           text=True, env=env, start_new_session=True)
        self.server.stdin.write(json.dumps(plan) + "\n")
        self.server.stdin.flush()
        return self.server

    def close(self) -> None:
        if self.server is not None:
            _kill(self.server)
            self.server.wait(timeout=60)
            self.server = None

    def _failpoint(self, plan: list[dict]) -> str:
        """``name:n``: a step of one of the plan's operations, at the n-th time the writer should pass it."""
        target = max(self.rng.randrange(len(plan)), self.rng.randrange(len(plan)))    # later ones more often
        name = self.rng.choice(POINTS[plan[target]["kind"]])
        passes = 1 + sum(name in POINTS[operation["kind"]] for operation in plan[:target])
        return f"{name}:{passes}"

    def _recovered(self, state: dict) -> list[str]:
        """The writer's view after recovery must be the model without the operation in flight, or with it."""
        got, problem = observed(state)
        if problem:
            pending = self.operations[self.pending]["kind"] if self.pending is not None else "none"
            return [f"{problem} (in flight: {pending}; the writer killed by {self.killed_by})"]
        got = untied(got, self.tied)
        without = untied(self.model.observed(), self.tied)
        applied = None
        if self.pending is not None:
            applied = copy.deepcopy(self.model)
            applied.apply(self.operations[self.pending])
            if got == untied(applied.observed(), self.tied) and got != without:
                self.model = applied
                self.stats.in_flight_committed += 1
                applied = None
        in_flight, self.pending = self.pending, None
        want = untied(self.model.observed(), self.tied)
        if got == want:
            return []
        problem = f"after recovery: {difference(got, want)}{self._origin(got, want)}"
        if applied is not None:            # neither without the operation in flight nor with it: say both
            operation = self.operations[in_flight]
            problem += (f" | with operation {in_flight} ({operation['kind']}, the writer killed by "
                        f"{self.killed_by}) applied: {difference(got, untied(applied.observed(), self.tied))}")
        return [problem]

    def _origin(self, got: dict, want: dict) -> str:
        """The operation that sent the first entry the two disagree on (its payload is ``count:index``)."""
        differ = sorted(set(got.get("entries") or []) ^ set(want.get("entries") or []))
        if not differ:
            return ""
        number = int(str(differ[0][3]).split(":")[0])
        return f" | sent by operation {number - 1}: {json.dumps(self.operations[number - 1])}"

    def _acknowledged(self, line: dict) -> list[str]:
        index = line.pop("ack")
        if index != self.acked:
            return [f"acknowledged operation {index}, expected {self.acked}"]
        want = self.model.apply(self.operations[index])
        self.acked += 1
        self.stats.operations += 1
        if line != want:
            return [f"operation {index} {self.operations[index]['kind']} answered {line}, the model says {want}"]
        return []


def _kill(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(engine: str, iterations: int, seed: int, workdir: Path, *, report=None, every: int = 50,
        alternate: bool = False) -> Stats:
    """``iterations`` writer processes against one database (a new one after a violation), then a last writer
    that only recovers and checks. ``report`` gets a progress line every ``every`` iterations. With ``alternate``,
    every other turn is a long-lived writer's (see ``Fuzz``)."""
    rng = random.Random(seed)
    stats = Stats()
    generation = 0
    fuzz = Fuzz(engine, workdir, rng, stats, alternate=alternate)
    try:
        for i in range(iterations):
            for violation in fuzz.iteration():
                stats.violations.append(f"seed {seed}, iteration {i}, database {fuzz.database}: {violation}")
                generation += 1
                fuzz.close()
                fuzz = Fuzz(engine, workdir, rng, stats, generation, alternate=alternate)
            if report and (i + 1) % every == 0:
                report(stats.line(iterations))
        fuzz.close()
        for violation in fuzz.iteration(kill=False):
            stats.violations.append(f"seed {seed}, final check, database {fuzz.database}: {violation}")
    finally:
        fuzz.close()
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--every", type=int, default=None, help="progress line every N iterations")
    parser.add_argument("--alternate", action="store_true",
                        help="every other turn goes to one long-lived writer process, which must not trust what it "
                             "remembers of the topic across the other writers' turns")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="seqdedup-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.engine == "spark":
        jvm.prepare()
    print(f"crash fuzz: engine {args.engine}, {args.iterations} iterations, seed {seed}, in {workdir}"
          f"{', alternating with a long-lived writer' if args.alternate else ''}", flush=True)
    every = args.every or (50 if args.engine == "duckdb" else 5)
    stats = run(args.engine, args.iterations, seed, workdir, report=lambda s: print(s, flush=True), every=every,
                alternate=args.alternate)
    for violation in stats.violations:
        print("VIOLATION", violation)
    print(f"done: {stats.iterations} iterations, {sum(stats.kills.values())} kills "
          f"({stats.kills['failpoint']} at failpoints, {stats.kills['timer']} at random moments), "
          f"{stats.operations} operations acknowledged, {stats.in_flight_committed} in-flight operations found "
          f"committed, {len(stats.violations)} violations")
    sys.exit(1 if stats.violations else 0)


if __name__ == "__main__":
    main()
