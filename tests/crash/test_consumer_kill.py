"""The consumer side of effectively-once under kill -9: a consumer that stores its position with its output in one
commit, killed at any step of a batch's commit and restarted, ends with an output that counts every entry of the
topic exactly once. Real processes, really killed (the Spark driver JVM included).

A child fills a topic; then children consume it into ``SELECT count(*) AS n, sum(amount) AS total FROM
new_entries`` a few entries a batch, each killed at a step picked by a seeded random choice (the n-th time it reaches
``after_output_rows``, ``before_publish`` or ``after_publish``, each point as often), until a last child runs to the
end. Every child opening the database checks that the output and the stored position agree (sum(n) = the entries up to the
position, sum(total) = the sum of their amounts) and that the position is where the kill must have left it. (A position
is an entry's message id, not a count: the test keeps the count of entries consumed and reads the position of the
last one from the topic.)
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("consumer_child.py")
POINTS = ("after_output_rows", "before_publish", "after_publish")
ENTRIES = {"duckdb": 60, "spark": 24}     # a Spark batch costs seconds, and each child starts a JVM
KILLS = {"duckdb": 6, "spark": 3}
BATCH = 7                                  # max_entries of a batch


def child(engine: str, database: str, *args: str, crash_at: str | None = None) -> tuple[int, dict, str]:
    """Run the child to its end or its kill: (exit code, its JSON lines merged, the tail of its stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "SEQDEDUP_CRASH_AT"}
    args += ("--crash-at", crash_at) if crash_at else ()
    done = subprocess.run([sys.executable, str(CHILD), engine, database, *args], capture_output=True, text=True,
                          env=env, start_new_session=True, timeout=600)   # its own group: the kill takes the JVM
    lines: dict = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            lines.update(json.loads(line))
    return done.returncode, lines, done.stderr[-3000:]


def check(state: dict, consumed: int, amounts: list[int], positions: list[int], what: str) -> None:
    """The consumer stored the position of its ``consumed``-th entry, and its output counts exactly those."""
    position = positions[consumed - 1] if consumed else 0
    assert state["position"] == position, f"{what}: the consumer stored position {state['position']}, expected " \
                                          f"{position} (that of entry {consumed})"
    assert state["n"] == consumed, f"{what}: the output counts {state['n']} entries, expected {consumed}"
    assert state["total"] == sum(amounts[:consumed]), f"{what}: the output's total {state['total']} is not the " \
                                                      f"sum of the first {consumed} amounts"


def test_consumer_killed_at_random_steps_resumes_with_no_loss_and_no_double_counting(engine, tmp_path):
    engine = engine.name
    database = str(tmp_path / ("home" if engine == "spark" else "seqdedup.duckdb"))
    entries = ENTRIES[engine]
    # the first child fills the topic, then consumes it like the others (on Spark, a driver's start saved)
    setup = ["--setup", str(entries)]
    rng = random.Random(f"consumer-kill-{engine}")
    chain = list(POINTS) * (KILLS[engine] // len(POINTS))      # every point, in a seeded random order
    rng.shuffle(chain)
    consumed, previous = 0, "the setup"
    kills = []
    for point in chain:
        remaining = -(-(entries - consumed) // BATCH)      # batches left
        # every kill leaves at least one batch for the next child: after_publish keeps the batch it dies in
        hit = rng.choice([n for n in (1, 2) if n <= remaining - (point == "after_publish")])
        code, lines, stderr = child(engine, database, *setup, "--consume", str(BATCH), crash_at=f"{point}:{hit}")
        if setup:
            assert "setup" in lines, f"the setup failed ({code}): {stderr}"
            amounts, positions = lines["setup"]["amounts"], lines["setup"]["positions"]
            assert len(amounts) == entries
            setup = []
        assert code == -signal.SIGKILL, f"{point}:{hit}: the child was not killed ({code}): {stderr}"
        assert "consumed" not in lines, f"{point}:{hit}: the child finished"
        check(lines["state"], consumed, amounts, positions, f"after {previous}")
        committed = hit if point == "after_publish" else hit - 1      # batches published before the kill
        consumed = min(entries, consumed + committed * BATCH)
        previous = f"the kill at {point}:{hit}"
        kills.append(f"{point}:{hit}")

    code, lines, stderr = child(engine, database, "--consume", str(BATCH))
    assert code == 0, stderr
    check(lines["state"], consumed, amounts, positions, f"after {previous}")
    assert lines["consumed"]["batches"][0][0] == (positions[consumed - 1] if consumed else 0)
    check(lines["consumed"], entries, amounts, positions, f"the last run (kills: {kills})")
    assert lines["consumed"]["n"] == len(amounts) and lines["consumed"]["total"] == sum(amounts)
    print(kills)
