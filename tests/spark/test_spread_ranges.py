"""On Spark, a statement one producer dominates is spread over ranges of that producer's ids (sql/plan/spread.py):
its entries are decided in every task, each range from the maxima of the ranges before it, and its counts summed
over its ranges. A batch entry that straddles two ranges must still reject what follows it in the next range, and a
producer's outcome must be one row."""
from __future__ import annotations

import pytest

from seqdedup import InvalidEntryError
from seqdedup.core import plans
from seqdedup.core import ranges as spread

from ..behaviour.test_composite_ids import entries, send
from ..behaviour.test_one_producer_matches_reference import SPREAD, two_partitions
from ..engines import ENGINES, Harness

pytestmark = pytest.mark.spark


def test_one_producers_entries_are_decided_over_ranges_carrying_the_maxima_of_the_ranges_before(
        tmp_path_factory, monkeypatch):
    engine = next(e for e in ENGINES if e.name == "spark")
    harness = Harness(engine, str(tmp_path_factory.getbasetemp() / "spark-home"), adapter=SPREAD)
    seen, real, settled, exceptions = [], spread.ranges, [], plans.exceptions
    monkeypatch.setattr(spread, "ranges", lambda run, given: seen.append(real(run, given)) or seen[-1])
    monkeypatch.setattr(plans, "exceptions", lambda *args: settled.append(1) or exceptions(*args))
    try:
        with two_partitions(harness):
            harness.topic()
            # a's ids 0..99 over 4 ranges (bounds 25, 50, 75): (20..60) spans three of them, 61 follows it (new:
            # above what the first range carries in), 5 repeats; b is one range. Decided in one pass, no straddle.
            rows = [("a", s, None) for s in range(0, 20)] + [("a", 20, 60), ("a", 61, None), ("a", 99, None),
                                                             ("a", 5, None), ("b", 3, None), ("b", 3, None)]
            result = harness.send(rows, ordered=False)
            assert seen[-1] is not None and not settled
            assert [(p.producer, p.written, p.duplicates, p.out_of_order) for p in result.producers] == [
                ("a", 23, 1, 0), ("b", 1, 1, 0)]
            assert sorted(harness.entries()) == sorted(
                [("a", s, s) for s in range(0, 20)] + [("a", 20, 60), ("a", 61, 61), ("a", 99, 99), ("b", 3, 3)])
            a = result.producers[0]         # (its first and last positions over all its ranges)
            assert harness.position_problem() is None and a.first_position < a.last_position
            assert harness.last("a") == 99
            # 110 and 115 fall in later ranges than (100..120): what that range carries in keeps them from being
            # written as new (one pass cannot tell whether (100..120) is written: the straddle is settled after it)
            again = harness.send([("a", 99, None), ("a", 100, 120), ("a", 110, None), ("a", 115, None),
                                  ("a", 121, None)], ordered=False)
            assert seen[-1] is not None and settled
            assert [(p.producer, p.written, p.duplicates, p.out_of_order) for p in again.producers] == [
                ("a", 2, 3, 2)]
            assert harness.last("a") == 121
            # without a highest id, payload conflicts (R18, judged by default) over ranges: each repeat meets its
            # written copy's fingerprint in its own range, a retry the topic's (99 holds "a/99")
            rows = [("a", s, None, "x") for s in range(130, 200)] + [
                ("a", 140, None, "y"), ("a", 199, None, "y"), ("a", 165, None, "x"), ("a", 99, None, "z")]
            harness.stage(rows)
            third = harness.session.sql(
                "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)")
            assert seen[-1] is not None
            assert [(p.producer, p.written, p.duplicates, p.payload_conflicts) for p in third.producers] == [
                ("a", 70, 4, 3)]
    finally:
        harness.close()


def test_an_invalid_entry_of_a_spread_producer_fails_the_statement_and_writes_nothing(tmp_path_factory):
    engine = next(e for e in ENGINES if e.name == "spark")
    harness = Harness(engine, str(tmp_path_factory.getbasetemp() / "spark-home"), adapter=SPREAD)
    try:
        with two_partitions(harness):
            harness.topic()
            for bad in [("a", None, None), ("a", 7, 3)]:       # (a NULL id; a highest id below the lowest)
                with pytest.raises(InvalidEntryError, match="Nothing was written"):
                    harness.send([("a", s, None) for s in range(30)] + [bad], ordered=False)
            with pytest.raises(InvalidEntryError, match="Nothing was written"):     # (only NULL ids: no range)
                harness.send([("a", None, None)] * 5 + [("b", 1, None)], ordered=False)
            assert harness.entries() == []
            harness.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
            for bad in [("slot", -1, 0), ("slot", 2**64, 0), ("slot", 3, None)]:     # (R19: a part out of range)
                with pytest.raises(InvalidEntryError, match="Nothing was written"):
                    send(harness, [("slot", lsn, 0) for lsn in range(30)] + [bad], ordered=False)
            assert entries(harness) == []
    finally:
        harness.close()


def test_a_cdc_slots_composite_ids_are_decided_over_ranges_of_their_text(tmp_path_factory, monkeypatch):
    # one slot's (lsn, index) ids, LSNs past signed 64-bit among them: spread over ranges whose bounds are ids' text
    # (R19: text order is tuple order), each repeat, retry and payload conflict as one window over the slot decides
    engine = next(e for e in ENGINES if e.name == "spark")
    harness = Harness(engine, str(tmp_path_factory.getbasetemp() / "spark-home"), adapter=SPREAD)
    seen, real = [], spread.ranges
    monkeypatch.setattr(spread, "ranges", lambda run, given: seen.append(real(run, given)) or seen[-1])
    top = 2**64 - 40
    try:
        with two_partitions(harness):
            harness.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2, dropped_entries="keys")
            first = [("slot", lsn, i, "x") for lsn in (7, 2**63, top) for i in range(8)]
            result = send(harness, first + [("slot", 7, 3, "x"), ("slot", top, 7, "y"), ("other", 1, 0, "x")],
                          ordered=False)
            assert seen[-1] is not None and "__sd_sequence_id < '" in seen[-1].sql()     # (bounds: ids' text)
            assert [(p.producer, p.written, p.duplicates, p.payload_conflicts) for p in result.producers] == [
                ("other", 1, 0, 0), ("slot", 24, 2, 1)]
            assert harness.session.last_sequence_id("cdc", "slot") == (top, 7)
            # a replay from an earlier LSN and new events after it, spread again from the marks
            again = send(harness, [("slot", 2**63, i, "x") for i in range(8)] + [
                ("slot", top + 1, i, "x") for i in range(20)] + [("slot", top + 1, 4, "x")], ordered=False)
            assert seen[-1] is not None
            assert [(p.producer, p.written, p.duplicates) for p in again.producers] == [("slot", 20, 9)]
            assert harness.session.last_sequence_id("cdc", "slot") == (top + 1, 19)
            assert harness.position_problem("cdc") is None
            assert sorted(s for p, s in entries(harness) if p == "slot") == sorted(
                [(lsn, i) for lsn in (7, 2**63, top) for i in range(8)] + [(top + 1, i) for i in range(20)])
            reasons = harness.session.sql("SELECT reason, COUNT(*) FROM seqdedup_dropped GROUP BY reason").rows
            assert sorted(reasons) == [("conflict", 1), ("repeat", 2), ("retry", 8)]
    finally:
        harness.close()
