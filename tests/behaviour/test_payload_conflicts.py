"""R18: a dropped entry whose (producer, lowest id) the topic holds with another payload is a conflict: counted per
producer and given the ledger reason ``conflict`` (``payload_conflicts`` record, the default), ignored (Pulsar), or
the statement refused with nothing written; compared only with entries published within ``conflict_window_minutes``.
Generated statements with retries, repeats, late and batch entries carrying one of two payloads, against the
reference model, which compares payloads whole where the engines compare fingerprints."""
from __future__ import annotations

import collections

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from seqdedup import PayloadConflictError
from seqdedup.udfs import Entry, Policies, SequenceTracker

from .test_matches_reference import fresh

EXAMPLES = {"duckdb": 40, "spark": 1, "connect": 1}

#: An entry (producer, lowest id, highest id or None, payload): two producers, few ids, two payloads, so that
#: retries and repeats often carry the other one.
entry = st.builds(lambda p, s, width, payload: (p, s, s + width if width is not None else None, payload),
                  st.sampled_from(["a", "b"]), st.integers(0, 6), st.one_of(st.none(), st.none(), st.integers(0, 2)),
                  st.sampled_from(["x", "y"]))


def _tie_free(rows: list[tuple], ordered: bool) -> list[tuple]:
    """Without ORDER BY, which copy of an id a statement writes is the engine's pick (R18's ties): there the
    copies of an id in one statement carry its first copy's payload, so that the pick changes nothing."""
    if ordered:
        return rows
    first: dict[tuple[str, int], str] = {}
    return [(p, s, h, first.setdefault((p, s), payload)) for p, s, h, payload in rows]


statements = st.lists(st.tuples(st.lists(entry, min_size=1, max_size=7), st.booleans()).map(
    lambda s: (_tie_free(*s), s[1])), min_size=1, max_size=4)


def conflicts_of(result) -> dict[str, int]:
    return {p.producer: p.payload_conflicts for p in result.producers if p.payload_conflicts}


def ledger(result) -> collections.Counter:
    frame = result.dropped
    return collections.Counter(zip(frame["producer"], frame["sequence_id"], frame["reason"]))


def applied(model: SequenceTracker, rows, ordered: bool, now: float = 0.0):
    return model.apply_statement([Entry(p, s, h, payload) for p, s, h, payload in rows], now=now,
                                 order=list(range(len(rows))) if ordered else None)


def test_conflicts_are_those_the_model_finds_and_their_ledger_reason(engine, tmp_path_factory):
    # (Spark: the explicit example only: its statements take the window plan's split write, and a straddle its
    # exceptions plan, where the dropped entries are the rows less those written; generated ones run on DuckDB)
    @settings(max_examples=EXAMPLES[engine.name], deadline=None, suppress_health_check=[HealthCheck.too_slow],
              phases=(Phase.explicit,) if engine.family == "spark" else tuple(Phase))
    @given(sent=statements)
    @example(sent=[
        ([("a", 1, None, "x"), ("a", 2, None, "x"), ("b", 3, 5, "x")], True),
        # a retry with another payload, one with the same, a repeat with another, a batch entry's retry with another
        ([("a", 1, None, "y"), ("a", 2, None, "x"), ("a", 4, None, "x"), ("a", 4, None, "y"), ("b", 3, 5, "y")],
         True),
        # without ORDER BY: a retry with another payload, repeats of one payload
        ([("a", 4, None, "y"), ("b", 9, None, "x"), ("b", 9, None, "x")], False),
        # a batch entry that straddles the mark (Spark's exceptions plan), after a conflicting retry
        ([("b", 9, None, "y"), ("b", 8, 12, "x"), ("a", 7, None, "x")], True)])
    def check(sent):
        with fresh(engine, tmp_path_factory) as harness:
            harness.topic(dropped_entries="keys", conflict_window_minutes="never")
            model = SequenceTracker(Policies(conflict_window_minutes=None), now=0.0)
            for rows, ordered in sent:
                result = harness.send(rows, ordered=ordered)
                expected = applied(model, rows, ordered)
                assert conflicts_of(result) == expected.conflicts, (rows, ordered)
                assert ledger(result) == collections.Counter(
                    (p, s, reason) for (p, s, _, _), reason in zip(rows, expected.reasons) if reason), (rows, ordered)

    check()


def test_a_refused_conflict_writes_nothing_and_names_the_entry(dedup):
    dedup.topic(payload_conflicts="refuse", dropped_entries="keys")
    dedup.send([("p", 1, None, "first"), ("p", 2, None, "second")])
    with pytest.raises(PayloadConflictError, match=r"producer 'p' sent id 1 again with another payload \(fingerprint "
                                                   r"-?\d+, where the topic holds -?\d+\).*Nothing was written"):
        dedup.send([("p", 3, None, "third"), ("p", 2, None, "second"), ("p", 1, None, "changed")])
    assert dedup.entries() == [("p", 1, 1), ("p", 2, 2)]
    assert dedup.session.sql("SELECT count(*) FROM seqdedup_dropped").rows == [(0,)]
    result = dedup.send([("p", 3, None, "third"), ("p", 1, None, "first")])    # the same retry, as it was: written
    assert (result.written, result.duplicates, result.payload_conflicts) == (1, 1, 0)


@pytest.mark.parametrize("kept", ["keys", "rows"])
def test_one_id_sent_twice_in_a_statement_with_two_payloads_is_one_conflict(dedup, monkeypatch, kept):
    # Without ORDER BY the engine picks the copy it writes (R18's ties); the other is the conflict either way, judged
    # against the entry written (the refusal names its fingerprint), in the statement without batch entries too.
    # Spark, large statements' ways: keeping keys, it judges the entries by Arrow from the fingerprints its write
    # staged; keeping rows, it writes the judged entries as files (no scratch table kept in its plans here), and
    # counts their conflicts and makes their ledger rows from those files by Arrow. No query either way
    monkeypatch.setattr(dedup.session.adapter, "IN_PLAN_BYTES", -1, raising=False)
    def send(rows):
        dedup.stage(rows)
        return dedup.session.sql("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)")

    dedup.topic(dropped_entries=kept)
    result = send([("p", 1, None, "x"), ("p", 1, None, "y"), ("q", 1, None, "z"), ("q", 1, None, "z")])
    assert (result.written, conflicts_of(result)) == (2, {"p": 1})
    assert ledger(result) == collections.Counter({("p", 1, "conflict"): 1, ("q", 1, "repeat"): 1})
    dedup.session.alter_topic("events", payload_conflicts="refuse")
    with pytest.raises(PayloadConflictError, match=r"producer 'p' sent id 2 again with another payload \(fingerprint "
                                                   r"(-?\d+), where the topic holds (?!\1\))-?\d+\)"):
        send([("p", 2, None, "x"), ("p", 2, None, "y"), ("q", 2, None, "z")])
    assert dedup.entries() == [("p", 1, 1), ("q", 1, 1)]


#: Two statements without ORDER BY or a highest id, where which copy of an id is written changes no answer: an
#: id's copies carry one payload, or are two with two payloads (one conflict, whichever is written).
SINGLE_ENTRIES = ([("a", 1, None, "x"), ("a", 2, None, "x"), ("b", 1, None, "x"), ("b", 2, None, "x")],
                  [("a", 1, None, "y"), ("a", 2, None, "x"), ("a", 3, None, "x"), ("a", 3, None, "y"),
                   ("a", 4, None, "x"), ("a", 4, None, "x"), ("a", 4, None, "x"), ("b", 1, None, "y"),
                   ("b", 1, None, "y"), ("b", 5, None, "z"), ("b", 6, None, "x"), ("b", 5, None, "w"),
                   ("c", 1, None, "x"), ("c", 1, None, "q"), ("c", 2, None, "x")])


def read_topic(dedup, monkeypatch, passes: str) -> None:
    """Have the engine ask the topic what it holds for the dropped ids in one pass (its every column read) or in
    two (``sql.plan.conflicts.held_by_topic``), whatever its size (Spark reads a topic of at most
    ``READ_WHOLE_BYTES`` in one: every topic of these tests; DuckDB never does)."""
    monkeypatch.setattr(dedup.session.adapter, "reads_whole", lambda table: passes == "one pass")


@pytest.mark.parametrize("passes", ["one pass", "two passes"])
@pytest.mark.parametrize("kept", ["keys", "rows"])
def test_single_entries_conflicts_are_the_models(dedup, monkeypatch, kept, passes):
    # Spark's window plan carries each repeat's written copy's fingerprint through its write (one reading of the
    # rows); only the retries are looked up in the topic. Keeping keys, the entries are judged by Arrow from what the
    # write staged; keeping rows, in a table of the judged entries, which this small statement's plans keep
    read_topic(dedup, monkeypatch, passes)
    if passes == "two passes":      # (and what the topic holds brought back as a large answer is: ``fetch_bulk``)
        for limit in ("BULK_ROWS", "BULK_BYTES"):
            monkeypatch.setattr(dedup.session.adapter, limit, 0, raising=False)
    dedup.topic(dropped_entries=kept, conflict_window_minutes="never")
    model = SequenceTracker(Policies(conflict_window_minutes=None), now=0.0)
    for rows in SINGLE_ENTRIES:
        dedup.stage(rows)
        result = dedup.session.sql("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)")
        expected = applied(model, rows, False)
        assert conflicts_of(result) == expected.conflicts, rows
        assert ledger(result) == collections.Counter(
            (p, s, reason) for (p, s, _, _), reason in zip(rows, expected.reasons) if reason), rows
    assert conflicts_of(result) == {"a": 2, "b": 3, "c": 1}      # (the model's, spelled out)


def test_ignored_conflicts_are_dropped_as_pulsar_drops_them(dedup):
    dedup.topic(payload_conflicts="ignore", dropped_entries="keys")
    dedup.send([("p", 1, None, "first")])
    result = dedup.send([("p", 1, None, "changed"), ("p", 2, None, "a"), ("p", 2, None, "b")])
    assert (result.duplicates, result.payload_conflicts) == (2, 0)
    assert sorted(result.dropped["reason"]) == ["repeat", "retry"]


@pytest.mark.parametrize("passes", ["one pass", "two passes"])
def test_an_entry_published_before_the_window_is_not_compared(dedup, monkeypatch, passes):
    read_topic(dedup, monkeypatch, passes)
    dedup.topic(conflict_window_minutes=60)
    model = SequenceTracker(Policies(conflict_window_minutes=60), now=0.0)
    first = [("p", 1, None, "first"), ("q", 1, None, "first")]
    dedup.send(first)
    applied(model, first, True)
    dedup.clock.advance(minutes=30)
    dedup.send([("q", 2, None, "second")])
    applied(model, [("q", 2, None, "second")], True, now=30 * 60)
    dedup.clock.advance(minutes=45)         # p's 1 was published 75 minutes ago, q's 2 45 minutes ago
    retries = [("p", 1, None, "changed"), ("q", 2, None, "changed"), ("q", 1, None, "changed")]
    result = dedup.send(retries)
    assert conflicts_of(result) == applied(model, retries, True, now=75 * 60).conflicts == {"q": 1}


def scratch_tables(monkeypatch) -> list[str]:
    """The prefixes of the scratch tables statements make from now on (``Scratch.name``), in order."""
    from seqdedup.core.writer import Scratch

    made: list[str] = []
    name = Scratch.name
    monkeypatch.setattr(Scratch, "name", lambda self, prefix: made.append(prefix) or name(self, prefix))
    return made


def test_a_statement_that_drops_nothing_judges_nothing(dedup, monkeypatch):
    # Most statements of a producer that sends each id once drop nothing: under the default policies (conflicts
    # recorded) they make no table of dropped entries and send no look-up (the cost R18 would add to every small
    # statement); one that drops an entry judges it
    made = scratch_tables(monkeypatch)
    dedup.topic()
    assert dedup.send([("p", 1, None, "a"), ("q", 1, None, "a")]).written == 2
    assert not {"__sd_dropped", "__sd_judged"} & set(made), made
    result = dedup.send([("p", 1, None, "changed"), ("p", 2, None, "b")])
    assert (result.written, result.payload_conflicts) == (1, 1)
    assert "__sd_judged" in made


def test_a_topic_is_read_whole_only_where_the_engine_estimates_it_small(dedup, monkeypatch):
    # Spark estimates a topic's size from its files (a Connect client cannot ask); DuckDB always reads in two passes
    dedup.topic()
    dedup.send([("p", 1, None, "first")])
    adapter, table = dedup.session.adapter, dedup.session.ref("events").table
    classic_spark = dedup.engine.family == "spark" and not adapter.remote
    assert adapter.reads_whole(table) == classic_spark
    monkeypatch.setattr(adapter, "READ_WHOLE_BYTES", 0)
    assert not adapter.reads_whole(table)
