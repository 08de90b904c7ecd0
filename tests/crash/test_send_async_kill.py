"""``send_async`` under ``kill -9``: a producer process killed with futures pending loses nothing it acknowledged,
and once restarted, sending the same entries again under the same ids, writes nothing twice (Pulsar's effectively-once
with a source of offsets: the ids come from the source, so a restarted producer's entries are known by them).

The first process is killed at its first acknowledgement: its later groups are queued or in flight, at whatever step
of a commit the kill lands. A real process, really killed (the Spark driver JVM included).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ..positions import position_problem

CHILD = Path(__file__).with_name("send_async_child.py")
#: Entries and group size per engine: a group is one statement, and a statement costs seconds on Spark.
SIZES = {"duckdb": (3_000, 100), "spark": (240, 80)}


def run(engine: str, database: str, *, kill_at_first_ack: bool) -> tuple[int, list[dict]]:
    count, group = SIZES[engine]
    child = subprocess.Popen([sys.executable, str(CHILD), engine, database, str(count), str(group)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines = []
    for line in child.stdout:
        if line.startswith("{"):
            lines.append(json.loads(line))
            if kill_at_first_ack and "ack" in lines[-1]:
                os.killpg(child.pid, signal.SIGKILL)
                break
    code = child.wait(timeout=600)
    assert code == (-signal.SIGKILL if kill_at_first_ack else 0), child.stderr.read()[-3000:]
    return code, lines


def test_a_producer_killed_with_futures_pending_loses_no_acknowledged_entry_and_writes_none_twice(engine, tmp_path):
    name = engine.name
    database = str(tmp_path / ("home" if name == "spark" else "seqdedup.duckdb"))
    count, _ = SIZES[name]
    _, killed = run(name, database, kill_at_first_ack=True)
    acknowledged = {line["ack"][0]: line["ack"][1] for line in killed if "ack" in line}
    assert acknowledged and all(not line["ack"][2] for line in killed if "ack" in line)

    _, restarted = run(name, database, kill_at_first_ack=False)
    entries = next(line["entries"] for line in restarted if "entries" in line)
    # nothing twice, nothing missing: each offset once, at one position
    assert [offset for offset, _, _ in entries] == list(range(count))
    position = {offset: position for offset, position, _ in entries}
    # nothing acknowledged lost: where the first process was told an entry was written, it is there
    assert {offset: position[offset] for offset in acknowledged} == acknowledged
    # the restart resumed at a mark that covers what was acknowledged, and what the topic already held (its
    # acknowledged entries and any commit the kill let through) came back as duplicates of its earlier write
    resumed = next(line["resumed"] for line in restarted if "resumed" in line)
    assert resumed >= max(acknowledged)
    again = {line["ack"][0]: line["ack"] for line in restarted if "ack" in line}
    assert sorted(again) == list(range(count))
    assert all(again[offset][2] == (offset <= resumed) for offset in again)
    assert all(again[offset][1] == position[offset] for offset in again)
    assert position_problem((commit, position) for _, position, commit in entries) is None
