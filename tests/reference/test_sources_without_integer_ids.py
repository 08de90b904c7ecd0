"""The oracle for issue 44's two kinds of source: composite sequence ids (R19: a CDC position such as (lsn, event
index), compared part by part; the engines do not take them yet) and the key window (R20: ``is_new(key)`` for sources
without stable ids; the engines take a window in minutes, tests/behaviour/test_key_window.py)."""
from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from seqdedup.errors import InvalidEntryError
from seqdedup.udfs import Entry, KeyWindow, Policies, SequenceTracker, WindowPolicy

U64_MAX = 2**64 - 1


# --- R19: composite ids ------------------------------------------------------------------------------------------

#: A statement of (producer, lsn, event index) entries and whether it is ordered; or a restart.
events = st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=8)
steps = st.lists(st.one_of(st.tuples(st.just("send"), st.tuples(events, st.booleans())), st.just(("restart", None))),
                 min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_composite_ids_decide_as_the_integers_that_keep_their_order(steps):
    # (lsn, index) and lsn * 10 + index order alike: every decision, position, reason and mark must be the same
    # (holes aside: a composite id has no next id, R19), restarts included
    as_tuples, as_integers = SequenceTracker(Policies(snapshot_interval_entries=3)), \
        SequenceTracker(Policies(snapshot_interval_entries=3))
    for kind, arg in steps:
        if kind == "restart":
            as_tuples, as_integers = as_tuples.recover(), as_integers.recover()
            continue
        sent, ordered = arg
        order = list(range(len(sent))) if ordered else None
        got = as_tuples.apply_statement([Entry(p, (lsn, i)) for p, lsn, i in sent], order=order)
        expected = as_integers.apply_statement([Entry(p, lsn * 10 + i) for p, lsn, i in sent], order=order)
        assert (got.statuses, got.positions, got.reasons, got.written, got.duplicates) == \
            (expected.statuses, expected.positions, expected.reasons, expected.written, expected.duplicates), sent
        assert got.gaps == []
        for producer in "ab":
            mark, integer = as_tuples.last_sequence_id(producer), as_integers.last_sequence_id(producer)
            assert (mark == -1 and integer == -1) or mark[0] * 10 + mark[1] == integer


def test_events_that_share_an_lsn_and_a_connector_that_replays():
    # PostgreSQL gives several events of one transaction the same LSN: the event's index tells them apart (Debezium's
    # fix, debezium/debezium#7531); a restarted connector replays from an earlier position; a second server replays
    # the same slot
    topic = SequenceTracker()
    first = topic.apply_statement([Entry("slot", (0x16B3748, i), payload=f"row {i}") for i in range(3)])
    assert first.positions == [1, 2, 3]
    replayed = topic.apply_statement([Entry("slot", (0x16B3748, i), payload=f"row {i}") for i in (1, 2)]
                                     + [Entry("slot", (0x16B3790, i), payload=f"next {i}") for i in (0, 1)],
                                     order=[0, 1, 2, 3])
    assert (replayed.positions, replayed.reasons) == ([None, None, 4, 5], ["retry", "retry", None, None])
    second_server = topic.apply_statement([Entry("slot", (0x16B3748, 0), payload="row 0"),
                                           Entry("slot", (0x16B3790, 1), payload="next 1")])
    assert second_server.written == {} and topic.last_sequence_id("slot") == (0x16B3790, 1)


def test_unsigned_64_bit_parts_do_not_overflow():
    topic = SequenceTracker()
    topic.apply_statement([Entry("p", (2**63 - 1, 5))])
    assert topic.apply_statement([Entry("p", (2**63, 0)), Entry("p", (U64_MAX, U64_MAX, ))]).positions == [2, 3]
    assert topic.apply_statement([Entry("p", (U64_MAX, 0))]).reasons == ["retry"]
    assert topic.last_sequence_id("p") == (U64_MAX, U64_MAX)


@pytest.mark.parametrize("sequence_id, highest, problem", [
    ((2**64, 0), None, r"a part 18446744073709551616 outside 0 to 2\^64 - 1"),
    ((5, -1), None, r"a part -1 outside 0 to 2\^64 - 1"),
    ((1, 2, 3, 4), None, r"has 4 parts; a composite id has 1 to 3"),
    ((1, "2"), None, r"a part '2' that is not an integer"),
    ((1, 2), (1, 5), r"has no batch entries"),
])
def test_a_bad_composite_id_is_refused_and_nothing_is_written(sequence_id, highest, problem):
    topic = SequenceTracker()
    with pytest.raises(InvalidEntryError, match=problem):
        topic.apply_statement([Entry("p", (0, 0)), Entry("p", sequence_id, highest)])
    assert topic.log == []


def test_a_topic_s_ids_have_one_shape():
    topic = SequenceTracker()
    with pytest.raises(InvalidEntryError, match=r"entry 1 .* has 3 parts where the topic's ids have 2 parts"):
        topic.apply_statement([Entry("p", (0, 0)), Entry("q", (0, 0, 0))])
    topic.apply_statement([Entry("p", (0, 0))])
    with pytest.raises(InvalidEntryError, match=r"sequence_id 7 is an integer where the topic's ids have 2 parts"):
        topic.apply_statement([Entry("q", 7)])
    with pytest.raises(InvalidEntryError, match=r"where the topic's ids have 2 parts"):
        topic.recover().publish("q", (1, 2, 3))


# --- R20: the key window -----------------------------------------------------------------------------------------

def test_a_window_of_entries_holds_the_last_entries_keys():
    window = KeyWindow(WindowPolicy(entries=3))
    assert window.apply_statement([(k, None) for k in "abcd"]).positions == [1, 2, 3, 4]
    # the window is now the entries at positions 2 to 4: a has left it, b has not
    result = window.apply_statement([("a", None), ("b", None), ("e", None), ("e", None)])
    assert (result.positions, result.reasons) == ([5, None, 6, None], [None, "in_window", None, "repeat"])
    assert set(window.keys) == {"a", "d", "e"}     # (pruned: the last three entries' keys)


def test_a_window_in_time_holds_the_keys_published_within_it():
    window = KeyWindow(WindowPolicy(minutes=10))
    window.apply_statement([(("order", 7), "first")], now=0.0)
    assert window.apply_statement([(("order", 7), "again")], now=600.0).reasons == ["in_window"]   # 10 min: within
    # past 10 minutes by the clock, but the topic's own time (its latest write, 0) has not moved: R11's clock keeps
    # the key, so that one statement whose clock is stepped forward lets no copy through
    assert window.apply_statement([(("order", 7), "later")], now=600.5).reasons == ["in_window"]
    assert window.apply_statement([(("order", 8), "other")], now=601.0).positions == [2]     # the topic's time moves
    assert window.apply_statement([(("order", 7), "later")], now=601.5).positions == [3]   # left it: written again
    # a clock stepped forward an hour, once: the topic's time is still 601, so the window keeps its keys
    assert window.apply_statement([(("order", 8), "again")], now=4200.0).reasons == ["in_window"]


def test_the_first_copy_in_arrival_order_is_written():
    window = KeyWindow(WindowPolicy(entries=100))
    result = window.apply_statement([("k", "late copy"), ("k", "first copy")], order=[1, 0])
    assert (result.positions, [e.payload for e in window.log]) == ([None, 1], ["first copy"])


def test_a_null_key_is_refused_and_nothing_is_written():
    window = KeyWindow(WindowPolicy(entries=5))
    with pytest.raises(InvalidEntryError, match="entry 1: the key is NULL"):
        window.apply_statement([("a", None), (None, None)])
    assert window.log == [] and window.apply_statement([((None, 1), 0), ((None, 1), 0)]).reasons == [None, "repeat"]


def test_a_window_policy_is_one_size():
    for bad in (dict(), dict(entries=3, minutes=1.0), dict(entries=0)):
        with pytest.raises(ValueError):
            WindowPolicy(**bad)


#: A key-window topic's life: statements of keys (a few, so that they repeat), the clock moving on, restarts.
window_steps = st.lists(st.one_of(
    st.tuples(st.just("send"), st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6)),
    st.tuples(st.just("wait"), st.sampled_from([30.0, 120.0, 400.0])),
    st.just(("restart", None))), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(steps=window_steps, policy=st.sampled_from([WindowPolicy(entries=4, snapshot_interval_entries=3),
                                                     WindowPolicy(minutes=5, snapshot_interval_entries=2)]))
def test_a_recovered_window_decides_as_one_never_stopped_and_holds_the_window_only(steps, policy):
    live, crashed, now = KeyWindow(policy), KeyWindow(policy), 0.0
    for kind, arg in steps:
        if kind == "wait":
            now += arg
        elif kind == "restart":
            crashed = crashed.recover()
        else:
            sent, judged = [(key, None) for key in arg], min(now, live.published_at)     # (R11's clock)
            got, expected = crashed.apply_statement(sent, now=now), live.apply_statement(sent, now=now)
            assert (got.positions, got.reasons) == (expected.positions, expected.reasons), (arg, now)
            # memory and snapshot rows bounded by the window, whatever the topic's size
            if policy.entries is not None:
                assert len(live.keys) <= policy.entries
                assert all(len(s.keys) <= policy.entries for s in live.snapshots)
            assert all(at.publish_time >= judged - 300 for at in live.keys.values()) if policy.minutes else True


@settings(max_examples=300, deadline=None)
@given(steps=window_steps, ordered=st.booleans())
def test_a_window_in_minutes_is_r11_applied_to_keys(steps, ordered):
    # what the engines run (sql/key_window.py): a key is a producer whose only id is 0, and the window in minutes is
    # the topic's producer_inactivity_timeout. Every decision the same, restarts included
    window = KeyWindow(WindowPolicy(minutes=5, snapshot_interval_entries=2))
    tracker, now = SequenceTracker(Policies(producer_inactivity_timeout=5, snapshot_interval_entries=2)), 0.0
    for kind, arg in steps:
        if kind == "wait":
            now += arg
        elif kind == "restart":
            window, tracker = window.recover(), tracker.recover()
        else:
            order = list(range(len(arg))) if ordered else None
            tracker.purge_inactive(now, by_log=True)        # (the engines purge as a statement begins)
            got = tracker.apply_statement([Entry(key, 0, payload=None) for key in arg], now=now, order=order)
            # (unordered, the engines write the copy of their pick: the model writes the first in input order)
            expected = window.apply_statement([(key, None) for key in arg], now=now, order=order)
            reasons = {"retry": "in_window", "repeat": "repeat", None: None}
            assert ([p is None for p in got.positions], [reasons[r] for r in got.reasons]) == \
                ([p is None for p in expected.positions], expected.reasons), (arg, now)
