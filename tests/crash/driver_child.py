"""One Spark driver of the multi-driver crash fuzz (drivers.py), on a shared metastore.

    python driver_child.py HOME METASTORE PLAN_FILE DRIVER FROM      (send the plan's statements from FROM on)
    python driver_child.py HOME METASTORE --check                    (report the topic and its recovered state)

Prints JSON lines: {"opened": pid}, then {"acked": i, "written": w, "duplicates": d, "conflicts": c} once statement i
of its plan has returned; with --check, {"entries": [[producer, id], ...], "marks": {...}, "log_marks": {...},
"position_problem": ...}.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repository, for tests.*

import seqdedup  # noqa: E402
from seqdedup.extensions.spark import SparkAdapter, local_session  # noqa: E402
from tests.concurrency import c17  # noqa: E402
from tests.positions import position_problem  # noqa: E402

TOPIC = c17.TOPIC


def say(**line) -> None:
    print(json.dumps(line), flush=True)


def check(session) -> None:
    with session.writer:     # recovers first, as any writer does: it drops what a compaction killed midway left
        state = session.writer.state(session.ref(TOPIC))
    entries = [list(r) for r in session.sql(f"SELECT _producer, _sequence_id FROM {TOPIC}").rows]
    log_marks = dict(session.sql(f"SELECT _producer, max(_highest_sequence_id) FROM {TOPIC} GROUP BY _producer").rows)
    table = state.marks.table
    marks = dict(zip(table.column("producer").to_pylist(), table.column("sequence_id").to_pylist()))
    twice = session.sql(f"SELECT _commit, _producer, _sequence_id, _position FROM {TOPIC} WHERE _position IN "
                        f"(SELECT _position FROM {TOPIC} GROUP BY _position HAVING count(*) > 1) ORDER BY _position").rows
    say(entries=entries, marks=marks, log_marks=log_marks, positions_twice=[list(r) for r in twice],
        partitions=session.adapter.storage.partition_ranges(session.ref(TOPIC)),
        position_problem=position_problem(session.sql(f"SELECT _commit, _position FROM {TOPIC}").rows))


def main() -> None:
    home, metastore = sys.argv[1], sys.argv[2]
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("seqdedup.state").setLevel(logging.INFO)     # the catch-ups and recoveries drivers.py counts
    # the partitions a compaction merged are dropped 20 s after (not 10 minutes), and a commit decided on a state
    # checked over 10 s before looks again: within a fuzz run, numbers are freed while other drivers still decide
    SparkAdapter.COVERED_GRACE = 20.0
    session = seqdedup.connect(local_session(home, master="local[1]", metastore=metastore))
    # compactions while drivers contend and get killed: every third commit unless told (drivers.py --compact-every);
    # and a snapshot every 20 entries, so that drivers catch up over the snapshots the others took (their chains of
    # increments and full snapshots, adopted: seqdedup/core/topic_state.py's catch_up)
    session.create_topic(TOPIC, {"payload": "STRING"}, if_not_exists=True,
                         compact_every_commits=int(os.environ.get("SEQDEDUP_FUZZ_COMPACT_EVERY", "3")),
                         snapshot_interval_entries=20)
    say(opened=os.getpid())
    if sys.argv[3] == "--check":
        check(session)
        return
    plan, driver, start = json.loads(Path(sys.argv[3]).read_text()), sys.argv[4], int(sys.argv[5])
    for i, rows in enumerate(plan[start:], start):
        result = c17.send(session, driver, [tuple(r) for r in rows])
        say(acked=i, written=result.written, duplicates=result.duplicates, conflicts=result.conflicts)


if __name__ == "__main__":
    main()
