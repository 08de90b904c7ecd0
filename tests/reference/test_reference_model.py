"""The oracle on its own: the upstream Pulsar tests replayed step by step (S-P01 to S-P03: ``MessageDuplicationTest``'s
``testIsDuplicate``, ``testIsDuplicateWithFailure`` and ``testInactiveProducerRemove``; S-C02 to S-C05: a restart with
an ``initialSequenceId`` below the mark, explicit and automatic ids mixed, disable then enable forgets, the snapshot
cap), the conformance scenarios that are pure state logic, and a property test that recovery always rebuilds the
live state."""
from __future__ import annotations

import itertools

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from seqdedup.errors import InvalidEntryError, PayloadConflictError, SequenceGapError
from seqdedup.udfs import DupStatus, Entry, Policies, SequenceTracker

NOT_DUP, DUP, UNKNOWN = DupStatus.NOT_DUP, DupStatus.DUP, DupStatus.UNKNOWN
LONG_MAX = 2**63 - 1


def ids(tracker, producer=None):
    """The log as (producer, sequence_id) pairs, or one producer's sequence ids."""
    if producer is None:
        return [(e.producer, e.sequence_id) for e in tracker.log]
    return [e.sequence_id for e in tracker.log if e.producer == producer]


# --- upstream Pulsar tests, step by step ---------------------------------------------------------------------------

def test_s_p01_is_duplicate():
    """MessageDuplicationTest#testIsDuplicate: is_duplicate alone, so persisted changes only where the test sets it."""
    t = SequenceTracker(Policies(snapshot_interval_entries=10, max_producers_in_snapshot=10))
    for producer, s, status, p1 in [("p1", 0, NOT_DUP, 0),    # 1: fresh producer
                                    ("p2", 1, NOT_DUP, 0),    # 2: independent key
                                    ("p1", 1, NOT_DUP, 1),    # 3
                                    ("p1", 5, NOT_DUP, 5),    # 4: hole 2..4 allowed
                                    ("p1", 0, UNKNOWN, 5)]:   # 5: persisted[p1] absent
        assert t.is_duplicate(producer, s) is status
        assert t.pushed["p1"] == p1
    assert t.pushed == {"p1": 5, "p2": 1} and t.persisted == {}
    t.persisted["p1"] = 0                                     # 6
    assert t.is_duplicate("p1", 0) is DUP
    assert t.pushed["p1"] == 5
    t.pushed["p1"], t.persisted["p1"] = 0, 0                  # 7: the highest id is recorded
    assert t.is_duplicate("p1", 1, 5) is NOT_DUP
    assert t.pushed["p1"] == 5
    assert t.is_duplicate("p1", 4, 8) is UNKNOWN              # 8: 4 <= pushed 5, 4 > persisted 0: whole entry
    assert t.pushed["p1"] == 5 and t.persisted["p1"] == 0
    assert t.log == []                                        # is_duplicate never writes


def test_s_p02_is_duplicate_with_failure():
    """MessageDuplicationTest#testIsDuplicateWithFailure: pushed runs ahead of persisted; a failed write resets it."""
    t = SequenceTracker()

    def marks(producer):
        return t.pushed.get(producer), t.persisted.get(producer)

    for step, (producer, s) in enumerate([("p1", 0), ("p2", 1), ("p1", 1), ("p1", 5)], start=1):   # 1-4
        assert t.is_duplicate(producer, s) is NOT_DUP
        assert t.record_persisted(producer, s) == step
        assert marks(producer) == (s, s)
    assert t.is_duplicate("p1", 0) is DUP                                    # 5
    assert marks("p1") == (5, 5) and len(t.log) == 4
    assert t.is_duplicate("p1", 6) is NOT_DUP                                # 6: write in flight
    assert marks("p1") == (6, 5)
    assert t.is_duplicate("p1", 6) is UNKNOWN                                # 7
    assert marks("p1") == (6, 5)
    assert t.record_persisted("p1", 6) == 5                                  # 8: addComplete for step 6
    assert marks("p1") == (6, 6)
    assert t.is_duplicate("p1", 7) is NOT_DUP                                # 9: then addFailed: never stored
    assert marks("p1") == (7, 6)
    t.reset_pushed()                                                         # fence, drain, reset
    assert t.pushed == {"p1": 6, "p2": 1} and t.persisted == {"p1": 6, "p2": 1}
    assert t.is_duplicate("p1", 6) is DUP                                    # 10
    assert marks("p1") == (6, 6)
    assert t.is_duplicate("p1", 8) is NOT_DUP                                # 11
    assert t.record_persisted("p1", 8) == 6
    assert marks("p1") == (8, 8) and marks("p2") == (1, 1)
    assert ids(t, "p1") == [0, 1, 5, 6, 8] and ids(t, "p2") == [1]
    assert [e.position for e in t.log] == [1, 2, 3, 4, 5, 6]


def test_s_p03_inactive_producers_are_purged():
    """MessageDuplicationTest#testInactiveProducerRemove (timeout 1 minute): only expired producers go."""
    t = SequenceTracker(Policies(producer_inactivity_timeout=1))
    for producer in ("p1", "p2", "p3"):
        assert t.publish(producer, 1, 2, now=0.0)[0] is NOT_DUP
    assert t.pushed == {"p1": 2, "p2": 2, "p3": 2}
    assert t.purge_inactive(now=30.0) == []
    t.publish("p1", 3, now=50.0)
    assert t.purge_inactive(now=70.0) == ["p2", "p3"]
    assert t.pushed == {"p1": 3} and t.state() == {"p1": 3}
    assert (t.snapshots[-1].kind, t.snapshots[-1].marks) == ("purge", {"p1": 3})


def test_record_persisted_snapshots_per_entry_but_a_statement_once():
    """Pulsar snapshots after every N-th persisted entry; a statement is one commit and snapshots at its end."""
    pulsar = SequenceTracker(Policies(snapshot_interval_entries=3))
    for s in range(7):
        pulsar.publish("p", s)
    assert [x.position for x in pulsar.snapshots] == [0, 3, 6]
    statement = SequenceTracker(Policies(snapshot_interval_entries=3))
    result = statement.apply_statement([Entry("p", s) for s in range(7)])
    assert [x.position for x in statement.snapshots] == [0, 7] and result.snapshot is statement.snapshots[-1]


def test_publish_validates_and_is_not_checked_when_disabled():
    t = SequenceTracker(Policies(deduplication_enabled=False))
    assert t.snapshots[-1].kind == "disabled"
    with pytest.raises(InvalidEntryError):
        t.publish("p", -1)
    assert [t.publish("p", 3), t.publish("p", 3)] == [(NOT_DUP, 1), (NOT_DUP, 2)]
    assert t.pushed == {} and t.last_sequence_id("p") == -1


# --- conformance scenarios that are pure state logic -----------------------------------------------------------------

def test_c01_single_messages():
    t = SequenceTracker()
    for producer, s in [("p1", 0), ("p2", 1), ("p1", 1), ("p1", 5)]:
        r = t.apply_statement([Entry(producer, s)])
        assert (r.written, r.duplicates, r.statuses) == ({producer: 1}, {}, [NOT_DUP])
    r = t.apply_statement([Entry("p1", 0)])
    assert (r.written, r.duplicates, r.statuses, r.positions) == ({}, {"p1": 1}, [DUP], [None])
    assert ids(t, "p1") == [0, 1, 5] and ids(t, "p2") == [1]
    assert t.last_sequence_id("p1") == 5 and t.last_sequence_id("p2") == 1 and t.last_sequence_id("p3") == -1


def test_c02_straddling_batch_entry_is_rejected_whole():
    t = SequenceTracker()
    r = t.apply_statement([Entry("p1", 1, 5), Entry("p1", 4, 8), Entry("p1", 6)], order=[0, 1, 2])
    assert r.statuses == [NOT_DUP, DUP, NOT_DUP] and r.positions == [1, None, 2]
    assert t.state() == {"p1": 6} and t.last_sequence_id("p1") == 6


def test_arrival_order_follows_order_else_sorted():
    t = SequenceTracker()
    r = t.apply_statement([Entry("p", 5), Entry("p", 3)], order=[0, 1])
    assert r.statuses == [NOT_DUP, DUP]
    u = SequenceTracker()
    r = u.apply_statement([Entry("p", 5), Entry("p", 3)])
    assert r.statuses == [NOT_DUP, NOT_DUP] and r.positions == [2, 1]
    with pytest.raises(ValueError):
        u.apply_statement([Entry("p", 9)], order=[1])


def test_c03_recovery_by_replay():
    t = SequenceTracker()
    assert t.apply_statement([Entry("p", 2), Entry("p", 3), Entry("p", 5)]).written == {"p": 3}
    r = t.apply_statement([Entry("p", 2), Entry("p", 4), Entry("p", 6)])
    assert r.statuses == [DUP, DUP, NOT_DUP]
    t = t.recover()
    assert t.last_sequence_id("p") == 6 and t.entries_since_snapshot == 4
    assert t.apply_statement([Entry("p", 2), Entry("p", 4)]).written == {}
    assert ids(t, "p") == [2, 3, 5, 6]


def test_c04_resends_before_and_after_restart():
    t = SequenceTracker()
    t.apply_statement([Entry("p", 0), Entry("p", 1), Entry("p", 2)])
    assert t.apply_statement([Entry("p", 1), Entry("p", 2)]).duplicates == {"p": 2}
    assert t.last_sequence_id("p") == 2
    t = t.recover()
    assert t.last_sequence_id("p") == 2
    assert t.apply_statement([Entry("p", 1), Entry("p", 2)]).duplicates == {"p": 2}
    assert ids(t, "p") == [0, 1, 2]


def test_c05_repeats_inside_one_statement():
    for order in (None, [0, 1, 2, 3], [3, 2, 1, 0]):
        t = SequenceTracker()
        r = t.apply_statement([Entry("p", 7), Entry("q", 7), Entry("p", 7), Entry("p", 7)], order=order)
        assert (r.written, r.duplicates) == ({"p": 1, "q": 1}, {"p": 2})
        assert sorted(ids(t)) == [("p", 7), ("q", 7)]


def test_c08_snapshot_positions_and_short_replay():
    t = SequenceTracker(Policies(snapshot_interval_entries=3))
    for s in range(10):
        t.apply_statement([Entry("p", s)])
    assert [(x.position, x.marks, x.kind) for x in t.snapshots] == [
        (0, {}, "enabled"), (3, {"p": 2}, "snapshot"), (6, {"p": 5}, "snapshot"), (9, {"p": 8}, "snapshot")]
    assert [x.snapshot_id for x in t.snapshots] == [1, 2, 3, 4]
    recovered = t.recover()
    assert recovered.entries_since_snapshot == 1 and recovered.last_sequence_id("p") == 9


def test_c09_disable_forgets_and_enable_starts_empty():
    t = SequenceTracker()
    assert t.apply_statement([Entry("p", s) for s in range(101)]).written == {"p": 101}
    t.disable()
    assert t.last_sequence_id("p") == -1 and t.state() == {}
    assert t.dup_status("p", 5) is NOT_DUP
    r = t.apply_statement([Entry("p", s % 50) for s in range(100)])   # repeats too: nothing is checked
    assert r.written == {"p": 100} and t.state() == {}
    assert t.recover().enabled is False
    t.enable()
    assert t.snapshots[-1].kind == "enabled" and t.snapshots[-1].position == 201
    assert t.apply_statement([Entry("p", 5)]).written == {"p": 1}
    assert t.last_sequence_id("p") == 5 and t.recover().last_sequence_id("p") == 5


def test_c11_purge_then_old_ids_are_accepted():
    t = SequenceTracker(Policies(producer_inactivity_timeout=1))
    t.apply_statement([Entry("p", s) for s in range(10)], now=0.0)
    assert t.purge_inactive(now=60.0) == []                  # not strictly older than the timeout yet
    assert t.purge_inactive(now=61.0) == ["p"]
    assert t.last_sequence_id("p") == -1 and t.recover().last_sequence_id("p") == -1
    assert t.apply_statement([Entry("p", 5)], now=62.0).written == {"p": 1}


def test_c12_long_max_then_everything_is_a_duplicate():
    t = SequenceTracker()
    assert t.apply_statement([Entry("p", LONG_MAX)]).written == {"p": 1}
    assert t.apply_statement([Entry("p", 0)]).statuses == [DUP]
    assert t.apply_statement([Entry("p", LONG_MAX)]).statuses == [DUP]
    assert t.last_sequence_id("p") == LONG_MAX


@pytest.mark.parametrize("entry, problem", [
    (Entry("p", None), "sequence_id is NULL"),
    (Entry("p", -3), "sequence_id -3 is negative"),
    (Entry("p", 5, 2), "highest_sequence_id 2 is below sequence_id 5"),
    (Entry(None, 1), "producer is NULL"),
    (Entry("p", 1, -1), "highest_sequence_id -1 is negative"),
    (Entry("p", LONG_MAX + 1), "outside signed 64-bit"),
    (Entry("p", "7"), "not an integer"),
])
def test_c13_invalid_entries_change_nothing(entry, problem):
    t = SequenceTracker(Policies(snapshot_interval_entries=1))
    t.apply_statement([Entry("p", 0)])

    def everything():
        return list(t.log), t.state(), dict(t.pushed), list(t.snapshots), t.entries_since_snapshot

    before = everything()
    with pytest.raises(InvalidEntryError, match=problem) as raised:
        t.apply_statement([Entry("p", 1), entry, Entry("q", 0)])
    assert "entry 1" in str(raised.value) and "Nothing was written" in str(raised.value)
    assert everything() == before


def test_c16_s_c02_initial_sequence_id_below_the_mark():
    t = SequenceTracker()
    for s in range(10):
        t.apply_statement([Entry("n", s)])
    initial = 4                                     # the producer's automatic ids start at initial + 1
    r = t.apply_statement([Entry("n", initial + 1 + i) for i in range(5)])
    assert r.statuses == [DUP] * 5 and r.written == {} and r.duplicates == {"n": 5}
    assert t.apply_statement([Entry("n", 10)]).written == {"n": 1}


def test_s_c03_mixed_explicit_and_automatic_ids():
    t = SequenceTracker()
    t.apply_statement([Entry("p", 100)])
    assert t.apply_statement([Entry("p", 0)]).statuses == [DUP]


def test_s_c05_snapshot_cap():
    t = SequenceTracker(Policies(max_producers_in_snapshot=1))
    t.apply_statement([Entry("p1", 0)], now=1.0)
    t.apply_statement([Entry("p2", 0)], now=2.0)
    r = t.apply_statement([Entry("p3", s) for s in range(1000)], now=3.0)
    assert r.snapshot is not None and r.snapshot.marks == {"p3": 999} and r.snapshot.position == 1002
    assert t.state() == {"p1": 0, "p2": 0, "p3": 999}        # the live maps are not capped
    recovered = t.recover()
    assert recovered.last_sequence_id("p1") == -1 and recovered.last_sequence_id("p3") == 999
    assert recovered.apply_statement([Entry("p1", 0)]).written == {"p1": 1}   # written again


def test_snapshot_cap_keeps_the_most_recently_active_ties_by_name():
    t = SequenceTracker(Policies(max_producers_in_snapshot=2))
    t.apply_statement([Entry("old", 0)], now=1.0)
    t.apply_statement([Entry("b", 0), Entry("a", 0), Entry("c", 0)], now=5.0)
    assert t.take_snapshot(now=6.0).marks == {"a": 0, "b": 0}
    t.apply_statement([Entry("old", 1)], now=7.0)
    snapshot = t.take_snapshot(now=8.0)
    assert snapshot.marks == {"old": 1, "a": 0} and snapshot.last_publish == {"old": 7.0, "a": 5.0}


def test_time_based_snapshot_only_when_something_was_written():
    t = SequenceTracker(Policies(snapshot_interval_seconds=120))
    assert t.apply_statement([Entry("p", 0)], now=10.0).snapshot is None
    r = t.apply_statement([Entry("p", 0)], now=200.0)        # a duplicate, but entry 0 was written since
    assert r.snapshot is not None and r.snapshot.position == 1
    assert t.apply_statement([Entry("p", 0)], now=400.0).snapshot is None     # nothing new since
    off = SequenceTracker(Policies(snapshot_interval_seconds=0))
    assert off.apply_statement([Entry("p", 0)], now=10_000.0).snapshot is None


# --- property: recovery rebuilds the live state; nothing is written twice --------------------------------------------

PRODUCERS = ["a", "b", "c"]
entry = st.builds(lambda p, s, width: Entry(p, s, None if width is None else s + width),
                  st.sampled_from(PRODUCERS), st.integers(0, 20), st.one_of(st.none(), st.integers(0, 4)))
send = st.tuples(st.just("send"), st.lists(entry, max_size=8), st.booleans(), st.integers(0, 100))
toggle = st.sampled_from([("disable",), ("enable",)])
step = st.one_of(send, send, send, send, st.just(("recover",)), toggle)   # disable/enable rarely


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(step, min_size=1, max_size=12), interval=st.sampled_from([1, 2, 3, 5, 1000]),
       seconds=st.sampled_from([0, 30, 120]), permutation=st.randoms(use_true_random=False))
def test_recovery_equals_the_live_state_and_nothing_is_written_twice(steps, interval, seconds, permutation):
    t = SequenceTracker(Policies(snapshot_interval_entries=interval, snapshot_interval_seconds=seconds))
    now, epoch_start = 0.0, 0         # epoch_start: the log position where deduplication was last (re)enabled
    for kind, *args in steps:
        if kind == "send":
            entries, shuffled, elapsed = args        # elapsed: seconds since the previous statement
            now += elapsed
            order = None
            if shuffled:
                order = list(range(len(entries)))
                permutation.shuffle(order)
            r = t.apply_statement(entries, now=now, order=order)
            assert DupStatus.UNKNOWN not in r.statuses
            assert sum(r.written.values()) == sum(p is not None for p in r.positions)
            assert sum(r.duplicates.values()) == r.statuses.count(DUP)
        elif kind == "recover":
            t = t.recover()
        elif kind == "disable" and t.enabled:
            t.disable(now)
        elif kind == "enable" and not t.enabled:
            t.enable(now)
            epoch_start = len(t.log)
        recovered = t.recover()
        assert recovered.enabled == t.enabled
        assert recovered.state() == t.state() and recovered.last_publish == t.last_publish
        assert {p: recovered.last_sequence_id(p) for p in PRODUCERS} == {p: t.last_sequence_id(p) for p in PRODUCERS}

    assert [e.position for e in t.log] == list(range(1, len(t.log) + 1))
    if not t.enabled:
        assert t.state() == {} and all(t.last_sequence_id(p) == -1 for p in PRODUCERS)
        return
    epoch = t.log[epoch_start:]
    for producer in PRODUCERS:
        mine = [e for e in epoch if e.producer == producer]
        # each entry starts above everything the producer wrote before it: no id written twice, not even in a batch
        assert all(later.sequence_id > earlier.highest_sequence_id for earlier, later in itertools.pairwise(mine))
        expected = max((e.highest_sequence_id for e in mine), default=None)
        assert t.state().get(producer) == expected
        assert t.last_sequence_id(producer) == (-1 if expected is None else expected)


# --- R18: payload conflicts ----------------------------------------------------------------------------------------

def _with(policy: str = "record", window: int | None = 1440) -> SequenceTracker:
    return SequenceTracker(Policies(payload_conflicts=policy, conflict_window_minutes=window))


def test_r18_a_retry_with_another_payload_is_a_conflict_and_one_with_the_same_is_a_retry():
    t = _with()
    t.apply_statement([Entry("p", 1, payload="a"), Entry("p", 2, payload="b")], now=0)
    r = t.apply_statement([Entry("p", 1, payload="a"), Entry("p", 2, payload="B"), Entry("p", 3, payload="c")],
                          now=60)
    assert r.reasons == ["retry", "conflict", None] and r.conflicts == {"p": 1}
    assert r.duplicates == {"p": 2} and [e.payload for e in t.log] == ["a", "b", "c"]     # the first copy stays


def test_r18_a_repeat_within_the_statement_is_judged_against_the_copy_written():
    t = _with()
    r = t.apply_statement([Entry("p", 5, payload="x"), Entry("p", 5, payload="y"), Entry("p", 5, payload="x")],
                          order=[0, 1, 2])
    assert r.reasons == [None, "conflict", "repeat"] and r.conflicts == {"p": 1}
    # unordered, the copy written is the engine's pick among ties (the model's: the first in input order), and the
    # count follows it: y written makes both x copies conflicts
    u = _with()
    r = u.apply_statement([Entry("p", 5, payload="y"), Entry("p", 5, payload="x"), Entry("p", 5, payload="x")])
    assert r.reasons == [None, "conflict", "conflict"] and r.conflicts == {"p": 2}


def test_r18_ignore_judges_nothing_as_pulsar_does():
    t = _with("ignore")
    t.apply_statement([Entry("p", 1, payload="a")])
    r = t.apply_statement([Entry("p", 1, payload="b")])
    assert r.reasons == ["retry"] and r.conflicts == {}


def test_r18_refuse_writes_nothing_and_names_the_first_conflict():
    t = _with("refuse")
    t.apply_statement([Entry("p", 1, payload="a"), Entry("q", 4, payload="d")])
    before = (list(t.log), t.state(), dict(t.pushed), t.entries_since_snapshot)
    statement = [Entry("q", 4, payload="D"), Entry("p", 1, payload="A"), Entry("p", 2, payload="b")]
    with pytest.raises(PayloadConflictError, match=r"producer 'p' sent id 1 again .*holds a\).*Nothing was written"):
        t.apply_statement(statement)
    assert (list(t.log), t.state(), dict(t.pushed), t.entries_since_snapshot) == before
    assert t.apply_statement([Entry("p", 1, payload="a"), Entry("p", 2, payload="b")]).written == {"p": 1}


def test_r18_a_hole_is_refused_before_a_conflict():
    t = SequenceTracker(Policies(payload_conflicts="refuse", gap_policy="refuse"))
    t.apply_statement([Entry("p", 1, payload="a")])
    with pytest.raises(SequenceGapError):
        t.apply_statement([Entry("p", 1, payload="A"), Entry("p", 3, payload="c")])


def test_r18_only_entries_published_within_the_window_are_compared():
    t = _with(window=10)
    t.apply_statement([Entry("p", 1, payload="a")], now=0)
    t.apply_statement([Entry("p", 2, payload="b")], now=300)
    r = t.apply_statement([Entry("p", 1, payload="A"), Entry("p", 2, payload="B")], now=601)   # 1 is 601 s old
    assert r.reasons == ["retry", "conflict"]
    unbounded = _with(window=None)
    unbounded.apply_statement([Entry("p", 1, payload="a")], now=0)
    assert unbounded.apply_statement([Entry("p", 1, payload="A")], now=10**9).reasons == ["conflict"]


def test_r18_keys_are_the_producer_and_the_lowest_id_and_recovery_judges_alike():
    t = _with()
    t.apply_statement([Entry("p", 4, 6, payload="batch")])
    r = t.apply_statement([Entry("p", 4, 8, payload="other"), Entry("p", 5, 9, payload="other")], order=[0, 1])
    # (p, 4) is held with another payload; (p, 5) was never written as an entry's lowest id: not judged
    assert r.reasons == ["conflict", "straddles_mark"]
    again = [Entry("p", 4, payload="other"), Entry("p", 4, 6, payload="batch")]
    assert t.recover().apply_statement(list(again)).reasons == t.apply_statement(list(again)).reasons


def test_r18_an_entry_written_after_an_enable_is_not_a_conflict_only_a_dropped_one_is():
    t = _with()
    t.apply_statement([Entry("p", 1, payload="a")])
    t.disable()
    t.enable()
    r = t.apply_statement([Entry("p", 1, payload="b"), Entry("p", 1, payload="c")], order=[0, 1])
    assert r.positions[0] is not None and r.reasons == [None, "conflict"]    # judged against the last one written
