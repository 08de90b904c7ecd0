"""The Structured Streaming sink: a stream stopped after a batch was written but before Spark marked it done, then
restarted from its checkpoint, leaves every (producer, sequence id) in the topic exactly once."""
from __future__ import annotations

import json
import os
import random
import time
from collections import Counter

import pytest

from seqdedup import RewriteError, TopicError
from seqdedup.clients.streaming import foreach_batch

from ..engines import ENGINES, Harness

pytestmark = pytest.mark.spark

SCHEMA = "producer STRING, seq BIGINT, line BIGINT, payload STRING"
FILES, CRASH_AFTER = 6, 2        # micro-batch CRASH_AFTER is written, then the query fails before committing it


@pytest.fixture
def spark_dedup(tmp_path_factory):
    """A fresh namespace on the test process's one SparkSession (the behaviour suite's, when both run)."""
    engine = next(e for e in ENGINES if e.name == "spark")
    harness = Harness(engine, str(tmp_path_factory.getbasetemp() / "spark-home"))
    harness.session.create_topic("events", {"payload": "STRING", "line": "BIGINT"})
    yield harness
    harness.close()


def make_files(seed: int = 7) -> list[list[dict]]:
    """Entries of 3 producers in 6 files: ids rise with holes, producers interleave, and earlier ids are sent again
    (from earlier files and earlier in the same file) with another payload. ``line`` is the arrival order."""
    rng = random.Random(seed)
    next_id = {p: 0 for p in ("p1", "p2", "p3")}
    sent: list[tuple[str, int]] = []
    files = []
    for f in range(FILES):
        rows = []
        for i in range(12):
            if sent and rng.random() < 0.35:
                producer, seq = rng.choice(sent)                       # a retransmission
            else:
                producer = rng.choice(sorted(next_id))
                seq = next_id[producer]
                next_id[producer] += rng.choice((1, 1, 2))             # holes
                sent.append((producer, seq))
            rows.append({"producer": producer, "seq": seq, "line": f * 100 + i, "payload": f"{producer}/{seq}@f{f}l{i}"})
        files.append(rows)
    return files


def expected_topic(files: list[list[dict]]) -> tuple[dict[tuple[str, int], str], Counter]:
    """R1 in file and line order: (producer, seq) -> payload written, and the duplicates dropped per producer."""
    marks: dict[str, int] = {}
    written, duplicates = {}, Counter()
    for row in (r for rows in files for r in rows):
        if row["seq"] > marks.get(row["producer"], -1):
            written[(row["producer"], row["seq"])] = row["payload"]
            marks[row["producer"]] = row["seq"]
        else:
            duplicates[row["producer"]] += 1
    return written, duplicates


def write_files(directory, files: list[list[dict]]) -> None:
    directory.mkdir()
    start = time.time() - 600
    for f, rows in enumerate(files):
        path = directory / f"part-{f}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (start + f, start + f))   # the file source takes files oldest first: one file, one batch


def topic_rows(dedup: Harness) -> list[tuple[str, int, str]]:
    return sorted(tuple(r) for r in dedup.session.sql("SELECT _producer, _sequence_id, payload FROM events").rows)


def test_stream_stopped_after_a_written_batch_and_restarted_writes_each_entry_once(spark_dedup, tmp_path):
    from pyspark.errors import StreamingQueryException

    dedup = spark_dedup
    spark = dedup.session.adapter.spark
    files = make_files()
    everything, duplicates = expected_topic(files)
    # the data has what the test is about: repeats within a file and across files, and nothing new ever lost
    assert any(len({(r["producer"], r["seq"]) for r in rows}) < len(rows) for rows in files)
    assert set(everything) == {(r["producer"], r["seq"]) for rows in files for r in rows}
    write_files(tmp_path / "in", files)
    checkpoint = str(tmp_path / "checkpoint")
    sink = foreach_batch(dedup.session, "events", producer="producer", sequence_id="seq", order_by="line")

    def start(function):
        return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
                .writeStream.foreachBatch(function).option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start())

    def crashing(batch_df, batch_id):
        sink(batch_df, batch_id)
        if batch_id == CRASH_AFTER:
            raise RuntimeError("injected crash after seqdedup wrote the batch")

    with pytest.raises(StreamingQueryException, match="injected crash"):
        start(crashing).awaitTermination(120)
    # Batch 2 is planned (offsets) and written, but not committed: Spark will run it again.
    logged = {d: sorted(int(n) for n in os.listdir(os.path.join(checkpoint, d)) if n.isdigit())
              for d in ("offsets", "commits")}
    assert logged == {"offsets": [0, 1, 2], "commits": [0, 1]}
    prefix, _ = expected_topic(files[:CRASH_AFTER + 1])
    assert topic_rows(dedup) == sorted((p, s, payload) for (p, s), payload in prefix.items())

    query = start(sink)
    assert query.awaitTermination(120)
    assert [p.batchId for p in query.recentProgress][:1] == [CRASH_AFTER]     # the replay of the written batch
    rows = topic_rows(dedup)
    assert rows == sorted((p, s, payload) for (p, s), payload in everything.items())
    assert max(Counter((p, s) for p, s, _ in rows).values()) == 1

    # The replayed batch counted every one of its rows as a duplicate, on top of the stream's own duplicates.
    replayed = Counter(r["producer"] for r in files[CRASH_AFTER])
    stats = dedup.session.stats("events")
    assert stats["written"] == len(everything)
    assert {p: c["duplicates"] for p, c in stats["producers"].items()} == {
        p: duplicates[p] + replayed[p] for p in ("p1", "p2", "p3")}
    assert sink.last_batch_id == FILES - 1
    assert not [t for t in spark.catalog.listTables("global_temp") if t.name.startswith("__sd_batch")]


def test_a_replayed_micro_batch_writes_nothing(spark_dedup):
    dedup = spark_dedup
    spark = dedup.session.adapter.spark
    rows = [("p1", 0, 0, "a"), ("p2", 5, 1, "b"), ("p1", 0, 2, "a again"), ("p1", 1, 3, "c")]
    batch = spark.createDataFrame(rows, SCHEMA)
    sink = foreach_batch(dedup.session, "events", producer="producer", sequence_id="seq", order_by=["line"])

    sink(batch, 7)
    assert (sink.last_result.written, sink.last_result.duplicates) == (3, 1)
    sink(batch, 7)                                   # Spark runs batch 7 again after a restart
    assert (sink.last_result.written, sink.last_result.duplicates) == (0, 4)
    assert topic_rows(dedup) == [("p1", 0, "a"), ("p1", 1, "c"), ("p2", 5, "b")]
    assert not [t for t in spark.catalog.listTables("global_temp") if t.name.startswith("__sd_batch")]


def test_bad_arguments_name_the_problem_and_the_fix(spark_dedup):
    dedup = spark_dedup
    spark = dedup.session.adapter.spark
    with pytest.raises(TopicError, match="unknown topic .*nope; create it first"):
        foreach_batch(dedup.session, "nope", producer="producer", sequence_id="seq")
    with pytest.raises(TopicError, match=r"has no columns \['body'\]"):
        foreach_batch(dedup.session, "events", producer="producer", sequence_id="seq", columns=["body"])

    sink = foreach_batch(dedup.session, "events", producer="producer", sequence_id="sequence")
    with pytest.raises(RewriteError, match="no column 'sequence' for sequence_id.*pass sequence_id="):
        sink(spark.createDataFrame([("p1", 0, 0, "a")], SCHEMA), 0)
    sink = foreach_batch(dedup.session, "events", producer="producer", sequence_id="seq")
    with pytest.raises(TopicError, match=r"lacks \['payload'\]"):
        sink(spark.createDataFrame([("p1", 0, 0)], "producer STRING, seq BIGINT, line BIGINT"), 0)
    assert topic_rows(dedup) == []


def test_an_empty_micro_batch_publishes_nothing(spark_dedup):
    dedup = spark_dedup
    spark = dedup.session.adapter.spark
    sink = foreach_batch(dedup.session, "events", producer="producer", sequence_id="seq", order_by=["line"])
    sink(spark.createDataFrame([("p1", 0, 0, "a")], SCHEMA), 1)
    commit = sink.last_result.commit
    sink(spark.createDataFrame([], SCHEMA), 2)         # (a no-data micro-batch: Spark may call foreachBatch so)
    assert sink.last_result is None and sink.last_batch_id == 2
    assert dedup.session.adapter.storage.last_published_commit(dedup.session.ref("events")) == commit   # no empty commit
    sink(spark.createDataFrame([("p1", 1, 0, "b")], SCHEMA), 3)
    assert sink.last_result.commit == commit + 1 and topic_rows(dedup) == [("p1", 0, "a"), ("p1", 1, "b")]
