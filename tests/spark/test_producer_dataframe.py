"""A Producer sends a Spark DataFrame: its rows arrive in the frame's order (over its partitions), with explicit or
automatic ids, and each entry's receipt carries its position. The other input kinds are in
tests/behaviour/test_producer.py, on every engine; only Spark has DataFrames of its own."""
from __future__ import annotations

import pytest

from seqdedup import TopicError

pytestmark = pytest.mark.spark


def test_a_spark_dataframe_is_sent_in_its_order_with_explicit_or_automatic_ids(spark_dedup):
    session = spark_dedup.session
    spark = session.adapter.spark
    # two partitions (local[2]): arrival order runs through the first, then the second
    offsets = spark.createDataFrame([(f"r{i}", i) for i in (5, 3, 9, 9, 12, 11, 20)], "payload STRING, id BIGINT")
    assert offsets.rdd.getNumPartitions() > 1
    with session.producer("events", name="file") as producer:
        explicit = producer.send(offsets, sequence_id="id")
        with pytest.raises(TopicError, match=r"unknown columns \['other'\]"):
            producer.send(spark.createDataFrame([("x", 21, 1)], "payload STRING, id BIGINT, other INT"),
                          sequence_id="id")
    assert [(r.sequence_id, r.duplicate) for r in explicit] == [
        (5, False), (3, True), (9, False), (9, True), (12, False), (11, True), (20, False)]
    with session.producer("events", name="auto") as producer:
        automatic = producer.send(spark.createDataFrame([("a",), ("b",), ("c",)], "payload STRING"))
    assert [(r.sequence_id, r.duplicate) for r in automatic] == [(0, False), (1, False), (2, False)]
    rows = session.sql("SELECT _producer, _sequence_id, _position, payload FROM events").rows
    positions = {(p, s): pos for p, s, pos, _ in rows}
    assert len(positions) == len(rows) == 7
    # each receipt's position is its entry's; the repeated 9 answers with the first 9's position
    written = {s: positions[("file", s)] for s in (5, 9, 12, 20)}
    assert explicit.positions == [written[5], None, written[9], written[9], written[12], None, written[20]]
    assert automatic.positions == [positions[("auto", s)] for s in range(3)]
    assert len({p for _, _, p, _ in rows}) == 7 and spark_dedup.position_problem() is None
    assert sorted((p, s, payload) for p, s, _, payload in rows) == [
        ("auto", 0, "a"), ("auto", 1, "b"), ("auto", 2, "c"),
        ("file", 5, "r5"), ("file", 9, "r9"), ("file", 12, "r12"), ("file", 20, "r20")]
