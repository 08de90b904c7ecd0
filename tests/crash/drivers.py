"""Crash fuzzing across Spark drivers: several driver processes write overlapping producers and ids into one topic
on a shared metastore (a PostgreSQL server of the run's own), at once, and are killed with SIGKILL (the whole
process group: the driver JVM too) at random moments, then restarted.

    python -m tests.crash.drivers --drivers 3 --kills 10 [--seed N] [--statements 12] [--compact-every 3]
                                                                                           (from the repo root)

Each driver has a plan: statements of its producers' ids, each producer's ids sent from 0 upwards without a gap
(a statement now and then repeats an entry), some producers shared with other drivers. A restarted driver sends
the statement that was in flight at the kill again, then the rest: as a Pulsar producer resends what it has not
had acknowledged. Since every driver sends each of its producers' ids in order and all of them, every id at or
below a producer's mark was written by someone, so when all plans are done the topic must hold every planned
(producer, id) exactly once. Checked at the end, from a new driver: no entry twice (no duplicate), none missing (no
acknowledged entry lost), positions unique and increasing in commit order, and the recovered marks (snapshot
chain + replay) equal to the marks computed from the log itself.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests import jvm
from tests.metastore import PostgresServer

CHILD = Path(__file__).with_name("driver_child.py")
#: What the drivers' seqdedup.state lines say, counted in the result.
STATE_LINES = {"catch-ups": "] caught up over", "over a snapshot of theirs": " adopted) in ",
               "recoveries": "] recovered from snapshot"}


def plans(rng: random.Random, drivers: int, statements: int) -> dict[str, list[list[tuple[str, int]]]]:
    """Per driver, its statements: its producers' ids in order, interleaved, in statements of random sizes."""
    shared = ["shared0", "shared1"]
    result = {}
    for d in range(drivers):
        name = f"d{d}"
        producers = shared + [f"{name}p{i}" for i in range(2)] + [f"shared{2 + d % 2}"]
        ids = {p: rng.randrange(20, 60) for p in producers}
        rows = [(p, s) for s in range(max(ids.values())) for p in producers if s < ids[p]]
        cuts = sorted(rng.sample(range(1, len(rows)), statements - 1))
        chunks = [rows[a:b] for a, b in zip([0] + cuts, cuts + [len(rows)])]
        for chunk in chunks:
            if rng.random() < 0.3:         # a retransmit inside the statement, after the entry it repeats
                at = rng.randrange(len(chunk))
                chunk.insert(rng.randrange(at + 1, len(chunk) + 1), chunk[at])
        result[name] = chunks
    return result


@dataclass
class Driver:
    name: str
    plan: list
    plan_file: str
    next: int = 0                                  # the first statement not acknowledged
    process: subprocess.Popen | None = None
    acked: list = field(default_factory=list)
    conflicts: int = 0
    log: object = None
    states: Counter = field(default_factory=Counter)   # how its states came up to date (its logs' seqdedup.state lines)

    def start(self, home: str, metastore: str) -> None:
        self.count_states()
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), home, metastore, self.plan_file, self.name, str(self.next)],
            stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        threading.Thread(target=self._read, args=(self.process,), daemon=True).start()

    def _read(self, process) -> None:
        for line in process.stdout:
            if line.startswith("{"):
                item = json.loads(line)
                if "acked" in item:
                    self.next = item["acked"] + 1
                    self.acked.append(item)
                    self.conflicts += item["conflicts"]

    def count_states(self) -> None:
        """Add up the catch-ups (over another driver's snapshot too) and whole recoveries its last process logged."""
        if self.log is None:
            return
        self.log.seek(0)
        for line in self.log:
            for what, said in STATE_LINES.items():
                self.states[what] += said in line

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def done(self) -> bool:
        return self.next >= len(self.plan)

    def failure(self) -> str | None:
        """What went wrong, if the process ended by itself before its plan was done."""
        if self.process.returncode not in (0, -signal.SIGKILL):
            self.log.seek(0)
            text = self.log.read()
            # the Java causes, which a Spark error's last lines (its stack) leave out
            causes = list(dict.fromkeys(line.strip() for line in text.splitlines() if "Caused by:" in line))[:8]
            return f"driver {self.name} failed ({self.process.returncode}): {text[-3000:]}\ncauses: {causes}"
        return None


def run(drivers: int, kills: int, seed: int, statements: int, workdir: Path) -> dict:
    rng = random.Random(seed)
    planned = plans(rng, drivers, statements)
    home = str(workdir / "home")
    with PostgresServer() as server:
        metastore = server.metastore()
        fleet = []
        for name, plan in planned.items():
            path = workdir / f"{name}.json"
            path.write_text(json.dumps(plan))
            fleet.append(Driver(name, plan, str(path)))
        killed, started = 0, time.monotonic()
        while not all(d.done for d in fleet):
            for driver in fleet:
                if not driver.running and not driver.done:
                    if driver.process is not None and (problem := driver.failure()):
                        raise AssertionError(problem)
                    driver.start(home, metastore)
            # a random while between kills (the others get on meanwhile); once the kills are spent, a look every
            # half second, so that a last restart or the end is not waited for
            time.sleep(rng.uniform(1, 12) if killed < kills else 0.5)
            running = [d for d in fleet if d.running and not d.done]
            if killed < kills and running:
                rng.choice(running).kill()         # at any moment: starting, recovering, deciding, publishing
                killed += 1
            if time.monotonic() - started > 3600:
                raise AssertionError("the drivers did not finish their plans within an hour")
        for driver in fleet:
            driver.process.wait()
            if problem := driver.failure():
                raise AssertionError(problem)
            driver.count_states()
        check = subprocess.run([sys.executable, str(CHILD), home, metastore, "--check"], capture_output=True,
                               text=True, timeout=600)
        report = next((json.loads(line) for line in check.stdout.splitlines() if line.startswith('{"entries"')), None)
        assert report is not None, check.stderr[-3000:]
    wanted = {(p, s) for plan in planned.values() for chunk in plan for p, s in chunk}
    found = Counter((p, s) for p, s in report["entries"])
    return {
        "drivers": drivers, "kills": killed, "statements acknowledged": sum(len(d.acked) for d in fleet),
        "entries": len(wanted), "conflicts": sum(d.conflicts for d in fleet),
        **{what: sum(d.states[what] for d in fleet) for what in STATE_LINES},
        "duplicates": sum(n - 1 for n in found.values() if n > 1),
        "lost": len(wanted - set(found)), "unplanned": len(set(found) - wanted),
        "lost entries": sorted(wanted - set(found))[:20],      # (producer, id): which, to replay a violation by hand
        "position problem": report["position_problem"] and (report["position_problem"],
                                                            report["positions_twice"][:6]),
        "marks differ": {p: (report["marks"].get(p), m) for p, m in report["log_marks"].items()
                         if report["marks"].get(p) != m},
        # the topic's partitions (commits first, last): fewer than its commits where compactions ran
        "partitions": report["partitions"],
    }


def violations(result: dict) -> list[str]:
    return [key for key in ("duplicates", "lost", "unplanned", "position problem", "marks differ") if result[key]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drivers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--statements", type=int, default=12, help="statements per driver")
    parser.add_argument("--compact-every", type=int, default=3, help="the topic's compact_every_commits")
    args = parser.parse_args()
    os.environ["SEQDEDUP_FUZZ_COMPACT_EVERY"] = str(args.compact_every)      # (the drivers' topic, when it is made)
    jvm.prepare()
    with tempfile.TemporaryDirectory(prefix="seqdedup-drivers-") as folder:
        result = run(args.drivers, args.kills, args.seed, args.statements, Path(folder))
    print(json.dumps(result, indent=1))
    sys.exit(1 if violations(result) else 0)


if __name__ == "__main__":
    main()
