"""What seqdedup says it did, on every engine: a snapshot, what retention prunes, a recovery, a check against the
log, a compaction and a lost commit race each log one INFO line under a ``seqdedup.*`` logger, the topic first, with
the figures (as Pulsar's broker logs ``[persistent://t] Replaying 1200 entries``). seqdedup adds no handler of its
own: nothing is printed unless the application turns logging on."""
from __future__ import annotations

import logging
import re

import pytest

from seqdedup import CommitConflict, failpoints
from seqdedup.core.recovery import recover

#: The loggers whose lines these tests read.
LOGGERS = ("seqdedup.snapshots", "seqdedup.state", "seqdedup.recovery", "seqdedup.compaction", "seqdedup.commits")


@pytest.fixture(autouse=True)
def no_leftover_faults():
    yield
    failpoints._injected.clear()


def said(caplog, logger: str) -> list[str]:
    """The INFO lines ``logger`` logged since the last ``caplog.clear()``, their seconds written ``N``."""
    return [re.sub(r" in \d+\.\d\d s$", " in N s", record.getMessage()) for record in caplog.records
            if record.name == logger and record.levelno == logging.INFO]


@pytest.mark.notyet(["connect"], raises=AssertionError, reason="a Spark Connect server may serve other clients, so "
                    "seqdedup writes there as one of several drivers, which prune no snapshot: removing catalog rows "
                    "rewrites the table under the others' appends (docs/engines/spark.md, Spark Connect)")
def test_a_snapshot_and_what_retention_prunes_with_it_each_log_one_line_topic_first(dedup, caplog):
    key = dedup.key()
    dedup.configure(PRUNE_SPACING=1)     # every full snapshot prunes (on Spark a small state's in batches)
    dedup.topic(snapshot_interval_entries=2, full_snapshot_interval=1)
    caplog.set_level(logging.INFO, logger="seqdedup")
    dedup.send([("a", 0), ("b", 0)])             # commit 2: a full snapshot, which prunes the ones before it
    assert said(caplog, "seqdedup.snapshots") == [
        f"[{key}] took snapshot 2 (snapshot, full, 2 rows) at position 2 in commit 2",
        # (the clock reads 2026-01-01 12:00:00; snapshot retention 0 minutes, the run log's 7 days)
        f"[{key}] pruned the snapshots before snapshot 2 taken by 2026-01-01 12:00:00 (but snapshot 1, where the "
        "state started over) and the run log before 2025-12-25 12:00:00"]
    assert all(not logging.getLogger(name).handlers for name in ("seqdedup", *LOGGERS))


def test_a_recovery_a_check_a_compaction_and_a_lost_commit_race_each_log_one_line_topic_first(dedup, caplog):
    key = dedup.key()
    dedup.topic(compact_every_commits="never")
    dedup.send([("a", 0), ("b", 0)])
    dedup.send([("a", 1)])
    dedup.restart()
    caplog.set_level(logging.INFO, logger="seqdedup")

    assert dedup.last("a") == 1                  # recovered: the topic's empty first snapshot, then a replay
    assert said(caplog, "seqdedup.state") == [
        f"[{key}] recovered from snapshot 1: replayed 3 entries of 2 commits after it (2 producers, log end 3) in N s"]

    caplog.clear()
    assert recover(dedup.session.broker, "events").ok   # the state agrees with the log: a fresh snapshot, in commit 4
    assert said(caplog, "seqdedup.recovery") == [
        f"[{key}] checked the state (snapshot 1 and 3 replayed entries, 2 producers; log end 3) against a replay from "
        "snapshot 1: 0 producers differ, 0 marks of the start wrong, 0 duplicates, 0 foreign rows; took snapshot 2 "
        "in N s"]

    caplog.clear()
    done = dedup.session.compact("events", factor=2)     # DuckDB keeps no partitions: nothing to merge, said so
    assert said(caplog, "seqdedup.compaction") == [
        f"[{key}] compacted {done.partitions_before} partitions into {done.partitions_after} ({len(done.merged)} "
        f"merges, {done.rows} rows rewritten, 0 leftovers of a compaction cut short dropped) in N s"]

    caplog.clear()
    # another driver publishes commit 5 first (here the refusal the metastore answers, raised just before publishing)
    failpoints.inject("before_publish", CommitConflict("another writer published commit 5 first"))
    result = dedup.send([("a", 2)])
    assert (result.conflicts, result.written) == (1, 1)      # decided again, and written once
    assert said(caplog, "seqdedup.commits") == [
        f"[{key}] lost commit 5 to another driver, which published it first: nothing of it is published"]
