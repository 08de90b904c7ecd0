"""R20 on the engines: ``WHERE is_new(key)`` writes an entry whose key was not written within the topic's window (in
minutes: the topic's ``producer_inactivity_timeout``, judged by R11's clock), the first copy of a key in a
statement, and nothing twice across restarts; in entries, the keys of the topic's last ``key_window_entries``
entries. Checked against the reference model of the window
(``udfs/key_window.py``) on generated statements of repeated keys, the clock moving on, and restarts."""
from __future__ import annotations

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from seqdedup import InvalidEntryError, RewriteError
from seqdedup.errors import SeqdedupWarning
from seqdedup.udfs import KeyWindow, WindowPolicy
from seqdedup.udfs.key_window import producer_of

from .test_matches_reference import fresh

EXAMPLES = {"duckdb": 20, "spark": 1, "connect": 1}
#: The window of the topics here: 5 minutes, a snapshot every 2 entries (so that restarts replay and recover both);
#: or the last 4 entries.
MINUTES, INTERVAL, ENTRIES = 5, 2, 4
#: Each window as the engines' policies set it, and as the model's.
WINDOWS = {"minutes": ({"producer_inactivity_timeout": MINUTES},
                       WindowPolicy(minutes=MINUTES, snapshot_interval_entries=INTERVAL)),
           "entries": ({"producer_inactivity_timeout": "never", "key_window_entries": ENTRIES},
                       WindowPolicy(entries=ENTRIES, snapshot_interval_entries=INTERVAL))}


def send(harness, keys: list, ordered: bool = True, key: str = "is_new(k)"):
    """One statement of entries with these keys (a key: a string, or a tuple (string, int) for a key of two parts),
    in this arrival order; each entry's payload says which copy it is."""
    first = [k[0] if isinstance(k, tuple) else k for k in keys]
    second = [k[1] if isinstance(k, tuple) else None for k in keys]
    harness.session.register("inbox", pa.table({
        "k": pa.array(first, pa.string()), "part": pa.array(second, pa.int64()),
        "payload": pa.array([f"{k}#{i}" for i, k in enumerate(keys)], pa.string()),
        "arrival": pa.array(range(len(keys)), pa.int64())}))
    order = " ORDER BY arrival" if ordered else ""
    return harness.session.sql(f"INSERT INTO events SELECT k, payload FROM inbox WHERE {key}{order}")


def topic(harness, **policies) -> None:
    harness.session.create_topic("events", {"k": "STRING", "payload": "STRING"},
                                 **{"producer_inactivity_timeout": MINUTES, "snapshot_interval_entries": INTERVAL,
                                    **policies})


def written(harness) -> list[tuple]:
    return sorted(tuple(r) for r in harness.session.sql("SELECT k, payload FROM events").rows)


steps = st.lists(st.one_of(
    st.tuples(st.just("send"), st.tuples(st.lists(st.sampled_from("abcde"), min_size=1, max_size=6), st.booleans())),
    st.tuples(st.just("wait"), st.sampled_from([60.0, 200.0, 400.0])),
    st.just(("restart", None))), min_size=1, max_size=10)


def test_is_new_writes_what_the_window_model_writes(engine, tmp_path_factory):
    # (Spark: the explicit example, for a test's time: it takes the window's every path; the generated ones on DuckDB)
    @settings(max_examples=EXAMPLES[engine.name], deadline=None, suppress_health_check=[HealthCheck.too_slow],
              phases=(Phase.explicit,) if engine.family == "spark" else tuple(Phase))
    @given(steps=steps, window=st.sampled_from(sorted(WINDOWS)))
    # repeats in a statement, a key in the window, a restart, a clock past the window with the topic's time behind
    # it (kept), then past it (written again)
    @example(steps=[("send", (["a", "b", "a"], True)), ("restart", None), ("send", (["b", "c"], True)),
                    ("wait", 400.0), ("send", (["a", "d", "d"], False)), ("send", (["a", "b"], True))],
             window="minutes")
    # in entries: a key leaves once 4 entries came after it (a, then b after a restart, whose recovery finds it)
    @example(steps=[("send", (["a", "b", "a", "c"], True)), ("send", (["a", "d", "e"], True)), ("restart", None),
                    ("send", (["a", "b", "c", "f"], False)), ("send", (["b", "c", "g"], True))], window="entries")
    def check(steps, window):
        with fresh(engine, tmp_path_factory) as harness:
            policies, policy = WINDOWS[window]
            topic(harness, **policies)
            model, now = KeyWindow(policy), 0.0
            keys_written, end = [], 0
            for kind, arg in steps:
                if kind == "wait":
                    harness.clock.advance(seconds=arg)
                    now += arg
                elif kind == "restart":
                    harness.restart()
                    model = model.recover()
                else:
                    keys, ordered = arg
                    result = send(harness, keys, ordered)
                    placed = {int(payload.rsplit("#", 1)[1]): at for payload, at in harness.session.sql(
                        f"SELECT payload, _position FROM events WHERE _position > {end}").rows}
                    end = max([end, *placed.values()])
                    # the model takes the statement's entries in the order the engine numbered them (the window's
                    # edge inside a statement follows positions, and ORDER BY orders each key's copies only)
                    decided = model.apply_statement([(k, None) for k in keys], now=now, order=sorted(
                        range(len(keys)), key=lambda i: (placed.get(i, end + 1), i)))
                    assert (result.written, result.duplicates) == (decided.written, len(keys) - decided.written)
                    assert sorted(placed) == [i for i, at in enumerate(decided.positions) if at is not None]
                    if ordered:     # (unordered, the engine writes a copy of its pick)
                        assert all(keys.index(keys[i]) == i for i in placed), (keys, placed)
                    keys_written += [keys[i] for i in placed]
                    assert sorted(k for k, _ in written(harness)) == sorted(keys_written), (keys, now)

    check()


@pytest.mark.connect_ci             # (the rules through a Spark Connect client too)
def test_a_key_window_behaves_as_r20_says(dedup):
    topic(dedup, dropped_entries="keys", payload_conflicts="ignore")     # (every copy has a payload of its own)
    pair = "is_new(k, part)"
    first = send(dedup, ["a", "b", "a", ("a", 1), ("c", None), ("a", None), ("é", 12)], key=pair)
    # keys of two parts: (a, NULL) three times is one key, (a, 1) another; the run log and the result count the keys
    # together, in one row whose producer is NULL
    assert (first.written, first.duplicates, [p.producer for p in first.producers]) == (5, 2, [None])
    # each key's producer name is the digest the reference model spells (a NULL part, a length in characters)
    assert {r[0] for r in dedup.session.sql("SELECT _producer FROM events").rows} == {
        producer_of(k) for k in [("a", None), ("b", None), ("a", 1), ("c", None), ("é", 12)]}
    assert sorted(first.dropped["reason"]) == ["repeat", "repeat"]
    # (the keys' positions together: the first and last the statement wrote)
    positions = tuple(dedup.session.sql("SELECT min(_position), max(_position) FROM events").rows[0])
    assert (first.producers[0].first_position, first.producers[0].last_position) == positions
    again = send(dedup, ["b", "d", "b"], key=pair)
    assert (again.written, sorted(again.dropped["reason"])) == (1, ["retry", "retry"])     # b: in the window
    assert send(dedup, ["b"]).written == 1          # a key of one part is another key than (b, NULL)
    dedup.restart()
    dedup.clock.advance(minutes=MINUTES + 1)
    # past the window by the clock, but the topic's latest write is not: R11's clock keeps the window (a statement
    # whose clock was stepped forward lets no copy through)
    assert send(dedup, ["a", "e"], key=pair).written == 1
    assert send(dedup, ["a"], key=pair).written == 1       # the topic's time moved on: (a, NULL) left the window
    assert written(dedup).count(("a", "a#0")) == 2
    rows = dedup.session.sql("SELECT count(*), count(producer) FROM seqdedup_statements").rows
    assert [tuple(r) for r in rows] == [(5, 0)]


def test_a_key_dropped_in_the_window_conflicts_with_the_payload_it_was_last_written_with(dedup):
    # R18 for keys: the topic's entry of a key in the window is the one at the key's mark (the position it was last
    # written at), found by position; a copy with another payload conflicts with it, a copy with the same does not.
    # A repeat of a key new to the window is judged against the copy the statement wrote (d)
    topic(dedup, dropped_entries="keys")

    def put(pairs: list[tuple[str, str]], ordered: bool = False):
        dedup.session.register("inbox", pa.table({"k": [k for k, _ in pairs], "payload": [p for _, p in pairs],
                                                  "arrival": range(len(pairs))}))
        order = " ORDER BY arrival" if ordered else ""
        return dedup.session.sql(f"INSERT INTO events SELECT k, payload FROM inbox WHERE is_new(k){order}")

    assert put([("a", "x"), ("b", "y")]).written == 2
    result = put([("a", "x"), ("a", "z"), ("b", "w"), ("c", "v"), ("c", "v"), ("d", "u"), ("d", "t")])
    assert (result.written, result.payload_conflicts) == (2, 3)
    assert sorted(result.dropped["reason"]) == ["conflict", "conflict", "conflict", "repeat", "retry"]
    dedup.clock.advance(minutes=MINUTES + 1)
    assert put([("e", "e")]).written == 1       # (the topic's time moves on: a left the window)
    assert put([("a", "q")]).written == 1       # a written again, at a later position
    dedup.restart()                             # (its mark recovered by snapshot and replay)
    result = put([("a", "x"), ("a", "q")], ordered=True)
    assert (result.written, result.payload_conflicts) == (0, 1)     # against q, its last payload, not x


def test_a_null_key_is_refused_and_the_statement_writes_nothing(dedup):
    topic(dedup)
    with pytest.raises(InvalidEntryError, match="1 entry has a NULL key at line 1"):
        send(dedup, ["a", None])
    assert written(dedup) == []
    with pytest.raises(RewriteError, match="is_new or is_not_dup, not both"):
        send(dedup, ["a"], key="is_new(k) AND is_not_dup(k, 0)")
    with pytest.raises(RewriteError, match="is_new takes a key of one to three parts"):
        send(dedup, ["a"], key="is_new(k, part, payload, arrival)")
    with pytest.raises(RewriteError, match="is_new must be a condition of the WHERE clause joined by AND, not inside OR"):
        send(dedup, ["a"], key="is_new(k) OR k = 'b'")


def test_with_deduplication_off_every_copy_of_a_key_is_written(dedup):
    topic(dedup)
    with pytest.warns(SeqdedupWarning, match="deduplication is off now"):
        dedup.session.alter_topic("events", deduplication_enabled=False)
    result = send(dedup, ["a", "a", "b"])
    assert (result.written, result.duplicates, [p.producer for p in result.producers]) == (3, 0, [None])
    assert sorted(k for k, _ in written(dedup)) == ["a", "a", "b"]
    # many copies, no ORDER BY: copies equal in their order, which a second sort may order otherwise (DuckDB's
    # window plan once counted 298 of 300 written, the fuzzer found)
    many = [f"k{i % 40}" for i in range(300)]
    for key in ("is_new(k)", "is_not_dup(k, 0)"):
        result = send(dedup, many, ordered=False, key=key)
        assert (result.written, result.duplicates) == (300, 0), key


def test_a_statement_carrying_much_of_a_large_state_joins_all_of_it(dedup, monkeypatch):
    # the semi-join of a large state (SEMI_JOIN_ABOVE) gives way to the whole state where a statement carries more
    # than its share of it, as a statement of many keys does: the same decisions either way
    from seqdedup.core import plans

    topic(dedup)
    dedup.session.adapter.SEMI_JOIN_ABOVE = 0
    monkeypatch.setattr(plans, "CARRIED_NAMES", 1)
    assert send(dedup, ["a", "b"]).written == 2
    result = send(dedup, ["a", "c", "d", "c"])
    assert (result.written, result.duplicates) == (2, 2)
    assert sorted(k for k, _ in written(dedup)) == ["a", "b", "c", "d"]


def test_a_window_in_entries_holds_the_last_keys_and_recover_agrees(dedup):
    from seqdedup.core.recovery import recover

    topic(dedup, **WINDOWS["entries"][0] | {"key_window_entries": 3})
    # (a first alone: where the window's edge falls inside a statement, the engine picks which keys stay)
    assert [send(dedup, keys).written for keys in (["a"], ["b", "c"], ["d"], ["a", "b", "e"])] == [1, 2, 1, 2]
    assert dedup.session.sql("SELECT k FROM events WHERE k = 'a' ORDER BY _position").rows == [("a",), ("a",)]
    # each key's entry carries its position as its highest id, the key's mark
    assert {tuple(r) for r in dedup.session.sql(
        "SELECT count(*), count(CASE WHEN _highest_sequence_id = _position THEN 1 END) FROM events").rows} == {(6, 6)}
    report = recover(dedup.session, "events")   # a written again once out of the window: no duplicate
    assert (report.differences, report.duplicates_found) == ([], 0)
    dedup.session.alter_topic("events", key_window_entries=100)
    report = recover(dedup.session, "events")   # in a window of 100, a's second entry is one
    assert [d["producer"] for d in report.duplicate_ids] == [producer_of("a")]
    assert send(dedup, ["f"]).written == 1
    dedup.session.alter_topic("events", key_window_entries=1)     # narrowed: f alone is in it now
    assert send(dedup, ["e", "f"]).written == 1
