"""The oracle itself: the upstream Pulsar tests replayed step by step (S-P01, S-P02, S-P03, S-C02 to S-C05 of
reference/pulsar_kafka_semantics.md), and the conformance scenarios that are pure state logic."""
from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from seqdedup.errors import InvalidEntryError
from seqdedup.udfs import DupStatus, Entry, Policies, SequenceTracker

NOT_DUP, DUP, UNKNOWN = DupStatus.NOT_DUP, DupStatus.DUP, DupStatus.UNKNOWN


def test_s_p01_is_duplicate():
    """MessageDuplicationTest#testIsDuplicate: persisted changes only where the test sets it."""
    t = SequenceTracker(Policies(snapshot_interval_entries=10, max_producers_in_snapshot=10))
    steps = [
        (("p1", 0), NOT_DUP, {"p1": 0}),
        (("p2", 1), NOT_DUP, {"p1": 0, "p2": 1}),
        (("p1", 1), NOT_DUP, {"p1": 1, "p2": 1}),
        (("p1", 5), NOT_DUP, {"p1": 5, "p2": 1}),
        (("p1", 0), UNKNOWN, {"p1": 5, "p2": 1}),        # persisted[p1] absent
    ]
    for args, status, pushed in steps:
        assert t.is_duplicate(*args) is status
        assert t.pushed == pushed
    t.persisted["p1"] = 0                                 # step 6
    assert t.is_duplicate("p1", 0) is DUP
    t.pushed["p1"], t.persisted["p1"] = 0, 0             # step 7
    assert t.is_duplicate("p1", 1, 5) is NOT_DUP
    assert t.pushed["p1"] == 5
    assert t.is_duplicate("p1", 4, 8) is UNKNOWN         # step 8: 4 <= pushed 5, 4 > persisted 0: whole entry
    assert t.pushed["p1"] == 5


def test_s_p02_is_duplicate_with_failure():
    """MessageDuplicationTest#testIsDuplicateWithFailure: pushed runs ahead of persisted; a failure resets it."""
    t = SequenceTracker()

    def send(producer, s):
        return t.is_duplicate(producer, s)

    def persist(producer, s):
        t.record_persisted(producer, s)

    for producer, s in [("p1", 0), ("p2", 1), ("p1", 1), ("p1", 5)]:    # steps 1-4
        assert send(producer, s) is NOT_DUP
        persist(producer, s)
    assert (t.pushed, t.persisted) == ({"p1": 5, "p2": 1}, {"p1": 5, "p2": 1})
    assert send("p1", 0) is DUP                                          # step 5
    assert send("p1", 6) is NOT_DUP                                      # step 6: write in flight
    assert (t.pushed["p1"], t.persisted["p1"]) == (6, 5)
    assert send("p1", 6) is UNKNOWN                                      # step 7
    persist("p1", 6)                                                     # step 8
    assert (t.pushed["p1"], t.persisted["p1"]) == (6, 6)
    assert send("p1", 7) is NOT_DUP                                      # step 9: then the write fails
    t.reset_pushed()
    assert (t.pushed, t.persisted) == ({"p1": 6, "p2": 1}, {"p1": 6, "p2": 1})
    assert send("p1", 6) is DUP                                          # step 10
    assert send("p1", 8) is NOT_DUP                                      # step 11
    persist("p1", 8)
    assert (t.pushed["p1"], t.persisted["p1"]) == (8, 8)
    assert [(e.producer, e.sequence_id) for e in t.log] == [("p1", 0), ("p2", 1), ("p1", 1), ("p1", 5), ("p1", 6),
                                                            ("p1", 8)]
    assert send("p1", 7) is DUP            # 7 failed and was never stored; now below the mark


def test_s_p03_inactive_producers_are_purged():
    t = SequenceTracker(Policies(producer_inactivity_timeout=1))
    for producer in ("p1", "p2", "p3"):
        t.publish(producer, 1, 2, now=0.0)
    assert t.purge_inactive(now=30.0) == []
    t.publish("p1", 3, now=50.0)
    assert t.purge_inactive(now=80.0) == ["p2", "p3"]
    assert t.state() == {"p1": 3}
    assert t.snapshots[-1].kind == "purge" and t.snapshots[-1].marks == {"p1": 3}


def test_c01_c05_c12_statements():
    t = SequenceTracker()
    for p, s in [("p1", 0), ("p2", 1), ("p1", 1), ("p1", 5)]:
        assert t.apply_statement([Entry(p, s)]).written == {p: 1}
    assert t.apply_statement([Entry("p1", 0)]).statuses == [DUP]
    assert t.last_sequence_id("p1") == 5
    r = t.apply_statement([Entry("p", 7), Entry("p", 7), Entry("q", 7), Entry("p", 7)])
    assert (r.written, r.duplicates) == ({"p": 1, "q": 1}, {"p": 2})
    r = t.apply_statement([Entry("z", 2**63 - 1)])
    assert r.written == {"z": 1} and t.apply_statement([Entry("z", 0)]).duplicates == {"z": 1}


def test_c02_straddling_batch_entry():
    t = SequenceTracker()
    r = t.apply_statement([Entry("p1", 1, 5), Entry("p1", 4, 8), Entry("p1", 6)], order=[0, 1, 2])
    assert r.statuses == [NOT_DUP, DUP, NOT_DUP]
    assert r.positions == [1, None, 2]
    assert t.last_sequence_id("p1") == 6


def test_c03_c04_recovery_by_replay():
    t = SequenceTracker()
    t.apply_statement([Entry("p", 2), Entry("p", 3), Entry("p", 5)])
    t.apply_statement([Entry("p", 2), Entry("p", 4), Entry("p", 6)])
    t = t.recover()
    assert t.last_sequence_id("p") == 6 and t.entries_since_snapshot == 4
    assert t.apply_statement([Entry("p", 2), Entry("p", 4)]).written == {}
    assert [e.sequence_id for e in t.log] == [2, 3, 5, 6]


def test_c08_snapshot_positions():
    t = SequenceTracker(Policies(snapshot_interval_entries=3))
    for s in range(10):
        t.apply_statement([Entry("p", s)])
    assert [(x.position, x.marks) for x in t.snapshots] == [(0, {}), (3, {"p": 2}), (6, {"p": 5}), (9, {"p": 8})]
    recovered = t.recover()
    assert recovered.entries_since_snapshot == 1 and recovered.last_sequence_id("p") == 9


def test_c09_disable_forgets_and_enable_starts_empty():
    t = SequenceTracker()
    t.apply_statement([Entry("p", s) for s in range(101)])
    t.disable()
    assert t.last_sequence_id("p") == -1
    assert sum(t.apply_statement([Entry("p", s) for s in range(100)]).written.values()) == 100
    t.enable()
    assert t.apply_statement([Entry("p", 5)]).written == {"p": 1}
    assert t.last_sequence_id("p") == 5 and t.recover().last_sequence_id("p") == 5


def test_c11_purge_then_old_ids_are_accepted():
    t = SequenceTracker(Policies(producer_inactivity_timeout=1))
    t.apply_statement([Entry("p", s) for s in range(10)], now=0.0)
    assert t.purge_inactive(now=61.0) == ["p"]
    assert t.last_sequence_id("p") == -1
    assert t.apply_statement([Entry("p", 5)], now=62.0).written == {"p": 1}


@pytest.mark.parametrize("entry, problem", [
    (Entry("p", None), "NULL sequence_id"), (Entry("p", -3), "negative"), (Entry("p", 5, 2), "below"),
    (Entry(None, 1), "NULL producer"), (Entry("p", 2**63), "above"),
])
def test_c13_invalid_entries_change_nothing(entry, problem):
    t = SequenceTracker()
    t.apply_statement([Entry("p", 0)])
    before = (list(t.log), t.state(), list(t.snapshots))
    with pytest.raises(InvalidEntryError, match=problem):
        t.apply_statement([Entry("p", 1), entry])
    assert (list(t.log), t.state(), list(t.snapshots)) == before


def test_c16_s_c02_initial_sequence_id_below_the_mark():
    t = SequenceTracker()
    t.apply_statement([Entry("n", s) for s in range(10)])
    r = t.apply_statement([Entry("n", 4 + 1 + i) for i in range(5)])
    assert r.duplicates == {"n": 5} and r.written == {}
    assert t.apply_statement([Entry("n", 10)]).written == {"n": 1}


def test_s_c03_mixed_explicit_and_automatic_ids():
    t = SequenceTracker()
    t.apply_statement([Entry("p", 100)])
    assert t.apply_statement([Entry("p", 0)]).statuses == [DUP]


def test_s_c05_snapshot_cap_keeps_the_most_recent():
    t = SequenceTracker(Policies(max_producers_in_snapshot=1, snapshot_interval_entries=1000))
    t.apply_statement([Entry("p1", 0)], now=1.0)
    t.apply_statement([Entry("p2", 0)], now=2.0)
    t.apply_statement([Entry("p3", s) for s in range(1000)], now=3.0)
    assert t.snapshots[-1].marks == {"p3": 999}
    recovered = t.recover()
    assert recovered.last_sequence_id("p1") == -1            # left out of the snapshot, nothing to replay
    assert recovered.apply_statement([Entry("p1", 0)]).written == {"p1": 1}


def test_time_based_snapshot_only_when_something_was_written():
    t = SequenceTracker(Policies(snapshot_interval_seconds=120))
    assert t.apply_statement([Entry("p", 0)], now=10.0).snapshot is None
    assert t.apply_statement([Entry("p", 0)], now=200.0).snapshot is not None    # entry 0 was written since
    assert t.apply_statement([Entry("p", 0)], now=400.0).snapshot is None        # nothing new since


statement = st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 12), st.one_of(st.none(), st.integers(0, 3))),
                     max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(statement, st.booleans(), st.booleans()), min_size=1, max_size=8),
       st.sampled_from([1, 2, 5, 1000]))
def test_recovery_equals_the_live_state_and_nothing_is_written_twice(statements, interval):
    t = SequenceTracker(Policies(snapshot_interval_entries=interval))
    for rows, ordered, crash in statements:
        entries = [Entry(p, s, s + w if w is not None else None) for p, s, w in rows]
        t.apply_statement(entries, order=list(range(len(entries))) if ordered else None)
        if crash:
            live = {p: t.last_sequence_id(p) for p in "ab"}
            t = t.recover()
            assert {p: t.last_sequence_id(p) for p in "ab"} == live
    ids = [(e.producer, e.sequence_id) for e in t.log]
    assert len(ids) == len(set(ids))
    for producer in "ab":
        written = [e.highest_sequence_id for e in t.log if e.producer == producer]
        assert t.last_sequence_id(producer) == (max(written) if written else -1)
