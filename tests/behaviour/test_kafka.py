"""R15: Kafka idempotent producers, on every engine: record batches as batch entries, epoch fencing, duplicates
reported as success with their original positions."""
from __future__ import annotations

import pytest

from seqdedup import InvalidEntryError, TopicError
from seqdedup.clients.kafka import INVALID_PRODUCER_EPOCH, NONE


def batch(pid, epoch, base, last, **extra):
    return {"producer_id": pid, "producer_epoch": epoch, "base_sequence": base, "last_sequence": last,
            "payload": f"{pid}/{epoch}/{base}..{last}", **extra}


def answers(result):
    return [(r.producer, r.error, r.duplicate, r.position) for r in result.receipts]


def position(dedup, producer: str, sequence_id: int) -> int:
    """Where the topic holds an entry (its message id)."""
    return dedup.session.sql(f"SELECT _position FROM events WHERE _producer = '{producer}' "
                             f"AND _sequence_id = {sequence_id}").rows[0][0]


def test_c15_epochs_fence_older_writers_and_duplicates_succeed(dedup):
    dedup.topic()
    ingest = dedup.session.kafka_ingest
    first = ingest("events", [batch(7, 0, 0, 4)])
    at_first = position(dedup, "KOP-PID-PREFIX-7-0", 0)
    assert answers(first) == [("KOP-PID-PREFIX-7-0", NONE, False, at_first)]
    assert answers(ingest("events", [batch(7, 0, 0, 4)])) == [("KOP-PID-PREFIX-7-0", NONE, True, at_first)]
    new_epoch = answers(ingest("events", [batch(7, 1, 0, 2)]))
    assert new_epoch == [("KOP-PID-PREFIX-7-1", NONE, False, position(dedup, "KOP-PID-PREFIX-7-1", 0))]
    assert new_epoch[0][3] > at_first
    fenced = ingest("events", [batch(7, 0, 5, 6)])
    assert answers(fenced) == [("KOP-PID-PREFIX-7-0", INVALID_PRODUCER_EPOCH, False, None)]
    assert dedup.entries() == [("KOP-PID-PREFIX-7-0", 0, 4), ("KOP-PID-PREFIX-7-1", 0, 2)]
    # fencing is remembered by the state, so it holds after a restart too
    dedup.restart()
    assert dedup.session.kafka_ingest("events", [batch(7, 0, 5, 6)]).fenced == 1
    assert dedup.session.last_sequence_id("events", "KOP-PID-PREFIX-7-0") == 4


def test_c15_in_one_ingest_arrival_order_decides(dedup):
    dedup.topic()
    result = dedup.session.kafka_ingest("events", [batch(7, 0, 0, 4), batch(7, 0, 0, 4), batch(7, 1, 0, 2),
                                                   batch(7, 0, 5, 6), batch(8, 3, 0, 0)])
    got = answers(result)
    assert [g[:3] for g in got] == [
        ("KOP-PID-PREFIX-7-0", NONE, False), ("KOP-PID-PREFIX-7-0", NONE, True), ("KOP-PID-PREFIX-7-1", NONE, False),
        ("KOP-PID-PREFIX-7-0", INVALID_PRODUCER_EPOCH, False), ("KOP-PID-PREFIX-8-3", NONE, False)]
    assert got[0][3] == got[1][3]                     # the repeat answers with the original's position
    positions = {p: pos for p, _, pos in dedup.session.sql(
        "SELECT _producer, _sequence_id, _position FROM events").rows}
    assert got[2][3] == positions["KOP-PID-PREFIX-7-1"] and got[4][3] == positions["KOP-PID-PREFIX-8-3"]
    assert (result.written, result.duplicates, result.fenced) == (3, 1, 1)


def test_overlapping_batch_is_a_duplicate_without_a_position_and_a_gap_is_accepted(dedup):
    dedup.topic()
    ingest = dedup.session.kafka_ingest
    ingest("events", [batch(1, 0, 0, 9)])
    overlap = ingest("events", [batch(1, 0, 5, 12), batch(1, 0, 20, 21)])
    # (5..12) straddles the mark 9: dropped whole (R2), a success; (20..21) leaves a gap: Pulsar's rule, written
    assert answers(overlap) == [("KOP-PID-PREFIX-1-0", NONE, True, None),
                                ("KOP-PID-PREFIX-1-0", NONE, False, position(dedup, "KOP-PID-PREFIX-1-0", 20))]


def test_batches_from_a_table_in_offset_order(dedup):
    dedup.topic()
    rows = ", ".join(f"({pid}, {epoch}, {base}, {last}, 'x', {offset})" for pid, epoch, base, last, offset in
                     [(3, 1, 0, 1, 11), (3, 0, 0, 4, 10), (3, 1, 0, 1, 12)])
    dedup.session.sql(f"CREATE TEMPORARY VIEW kafka_in AS SELECT * FROM VALUES {rows} "
                      "AS t(producer_id, producer_epoch, base_sequence, last_sequence, payload, kafka_offset)")
    result = dedup.session.kafka_ingest("events", "kafka_in", order_by="kafka_offset")
    assert [(r.producer_epoch, r.error, r.duplicate) for r in result.receipts] == [
        (0, NONE, False), (1, NONE, False), (1, NONE, True)]
    with pytest.raises(TopicError, match="order_by"):
        dedup.session.kafka_ingest("events", "kafka_in")
    dedup.session.sql("CREATE TEMPORARY VIEW no_last AS SELECT producer_id, producer_epoch, base_sequence, payload, "
                      "kafka_offset FROM kafka_in")
    with pytest.raises(TopicError, match=r"lack columns \['last_sequence'\]"):
        dedup.session.kafka_ingest("events", "no_last", order_by="kafka_offset")


BAD = [   # (what, rows, error, message): each one is refused whole, beside a valid batch
    ("no sequences", [{"producer_id": 1, "producer_epoch": 0, "payload": "x"}], InvalidEntryError, "NULL sequence_id"),
    ("negative producer id", [batch(-1, 0, 0, 0)], InvalidEntryError, "producer_id"),
    ("NULL epoch", [batch(1, None, 0, 0)], InvalidEntryError, "producer_epoch"),
    ("last below base", [batch(1, 0, 4, 2)], InvalidEntryError, "highest_sequence_id below"),
    ("negative sequence", [batch(1, 0, -2, 0)], InvalidEntryError, "negative"),
]


def test_bad_batches_fail_clearly_and_change_nothing(dedup):
    # one test for the cases: on Spark each topic costs seconds
    dedup.topic()
    dedup.session.kafka_ingest("events", [batch(9, 0, 0, 0)])
    before = dedup.entries(), dedup.snapshot_rows()
    for what, rows, error, match in BAD:
        with pytest.raises(error, match=match):
            dedup.session.kafka_ingest("events", [batch(9, 0, 1, 1)] + rows)
        assert (dedup.entries(), dedup.snapshot_rows()) == before, what
