"""R17: a topic's ``gap_policy`` says what a statement does with an entry whose id leaves a hole after its producer's
mark: ``allow`` (Pulsar: any id above the mark), ``record`` (each hole (producer, after, before) in ``seqdedup_gaps``,
in the statement's commit) or ``refuse`` (Kafka and Fluss: the statement writes nothing, and the error names the
first hole). Generated statements with holes, repeats, disorder, batch entries and restarts, against the reference
model: the holes recorded, the refusals, and the topic after each."""
from __future__ import annotations

import collections

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from seqdedup import SequenceGapError
from seqdedup.udfs import Entry, Policies, SequenceTracker

from .test_dropped_ledger import SENDS_AND_RESTARTS, statements
from .test_matches_reference import fresh

EXAMPLES = {"duckdb": 25, "spark": 1, "connect": 1}
EXPLICIT_ONLY = (Phase.explicit,)


def recorded(harness, result) -> collections.Counter:
    rows = harness.session.sql("SELECT producer, after_id, before_id FROM seqdedup_gaps "
                               f"WHERE statement_id = '{result.statement_id}'").rows
    return collections.Counter(tuple(r) for r in rows)


@pytest.mark.parametrize("policy", ["record", "refuse"])
def test_holes_are_recorded_or_refused_as_the_model_says(engine, tmp_path_factory, policy):
    # (Spark: the explicit example only, whose statements take every path there, for a test's time; the generated
    # ones run on DuckDB, where the same rule is decided by the same reference model)
    @settings(max_examples=EXAMPLES[engine.name], deadline=None, suppress_health_check=[HealthCheck.too_slow],
              phases=EXPLICIT_ONLY if engine.family == "spark" else tuple(Phase))
    @given(steps=SENDS_AND_RESTARTS)
    # holes after a mark, after a batch entry, none for a producer's first id, a repeat and a late entry between
    @example(steps=[("send", ([("a", 1, None), ("b", 5, None)], True)),
                    ("restart", None),
                    ("send", ([("a", 2, 4), ("a", 7, None), ("a", 7, None), ("a", 6, None), ("b", 9, 10),
                               ("c", 3, None)], True))])
    def check(steps):
        with fresh(engine, tmp_path_factory) as harness:
            harness.topic(gap_policy=policy)
            model = SequenceTracker(Policies(gap_policy=policy), now=0.0)
            for rows, ordered, model in statements(harness, model, steps):
                entries = [Entry(p, s, h) for p, s, h in rows]
                order = list(range(len(rows))) if ordered else None
                try:
                    expected = model.apply_statement(entries, order=order)
                except SequenceGapError as refused:
                    with pytest.raises(SequenceGapError, match="gap_policy is refuse") as raised:
                        harness.send(rows, ordered=ordered)
                    assert str(raised.value) == str(refused)        # the same first hole named
                else:
                    result = harness.send(rows, ordered=ordered)
                    assert recorded(harness, result) == (collections.Counter(expected.gaps) if policy == "record"
                                                         else collections.Counter())
                assert sorted(harness.entries()) == sorted((e.producer, e.sequence_id, e.highest_sequence_id)
                                                           for e in model.log)
                assert harness.unread_directories() == []           # a refused commit leaves no file behind

    check()


def test_allow_records_nothing_and_a_policy_takes_only_its_words(dedup):
    dedup.topic()
    assert dedup.send([("p", 1), ("p", 5)]).written == 2
    assert dedup.session.gaps("events").rows == []
    with pytest.raises(Exception, match="gap_policy: expected one of allow, record, refuse"):
        dedup.session.alter_topic("events", gap_policy="warn")
