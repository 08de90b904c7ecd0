"""R16: what a statement keeps of the entries it drops. With ``dropped_entries`` = ``keys`` (or ``rows``) every dropped
entry gets a row in the ledger ``seqdedup_dropped``, in the statement's commit, with the reason the reference model
gives it (retry, straddles_mark, repeat, late); ``counts`` keeps the run log's counts only (the default), ``nothing``
neither. Generated statements with repeats, holes, disorder, batch entries that straddle the mark, and restarts."""
from __future__ import annotations

import collections

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from seqdedup import PolicyError, TopicError
from seqdedup.udfs import Entry, Policies, SequenceTracker

from .test_matches_reference import fresh, statement

EXAMPLES = {"duckdb": 40, "spark": 1, "connect": 1}
EXPLICIT_ONLY = (Phase.explicit,)


#: Statements (entries in arrival order, ordered?) with restarts between them.
SENDS_AND_RESTARTS = st.lists(st.one_of(statement.map(lambda s: ("send", s)), st.just(("restart", None))),
                              min_size=1, max_size=5)


def statements(harness, model: SequenceTracker, steps):
    """(rows, ordered, model) of each statement of ``steps``, the engine and the model restarted where asked (the
    model as recovered from then on)."""
    for kind, arg in steps:
        if kind == "restart":
            harness.restart()
            model = model.recover()
        else:
            yield (*arg, model)


def ledger(harness, result) -> collections.Counter:
    """The statement's ledger rows: (producer, id, highest, reason), counted."""
    frame = result.dropped
    return collections.Counter(zip(frame["producer"], frame["sequence_id"], frame["highest_sequence_id"],
                                   frame["reason"]))


def expected(model: SequenceTracker, rows, ordered: bool) -> collections.Counter:
    """The model's dropped entries of one statement, with their reasons; the statement applied to the model."""
    result = model.apply_statement([Entry(p, s, h) for p, s, h in rows],
                                   order=list(range(len(rows))) if ordered else None)
    return collections.Counter((p, s, s if h is None else h, reason)
                               for (p, s, h), reason in zip(rows, result.reasons) if reason is not None)


def test_every_dropped_entry_has_a_ledger_row_with_the_models_reason(engine, tmp_path_factory):
    # (Spark: the explicit example only, whose statements take every path there, for a test's time; the generated
    # ones run on DuckDB, where the same rule is decided by the same reference model)
    @settings(max_examples=EXAMPLES[engine.name], deadline=None, suppress_health_check=[HealthCheck.too_slow],
              phases=EXPLICIT_ONLY if engine.family == "spark" else tuple(Phase))
    @given(steps=SENDS_AND_RESTARTS)
    # every reason, and a batch entry dropped after one that raised the mark in the same statement (Spark's one pass
    # leaves the entries after it undecided: its exceptions plan decides them)
    @example(steps=[("send", ([("a", 1, None), ("a", 1, None), ("b", 3, 5), ("c", 0, 5), ("c", 3, 8), ("c", 6, None)],
                              True)),
                    ("restart", None),
                    ("send", ([("a", 0, None), ("a", 3, None), ("a", 2, None), ("b", 4, 7), ("a", 3, None)], True))])
    def check(steps):
        with fresh(engine, tmp_path_factory) as harness:
            harness.topic(dropped_entries="keys")
            model = SequenceTracker(Policies(), now=0.0)
            sent = 0
            for rows, ordered, model in statements(harness, model, steps):
                result = harness.send(rows, ordered=ordered)
                reasons = expected(model, rows, ordered)
                assert ledger(harness, result) == reasons, (rows, ordered)
                sent += sum(reasons.values())
                # every row of the ledger is one dropped entry of a published statement, counted in the run log too
                total, logged = harness.session.sql(
                    "SELECT (SELECT count(*) FROM seqdedup_dropped), "
                    "(SELECT coalesce(sum(duplicates), 0) FROM seqdedup_statements)").rows[0]
                assert total == logged == sent

    check()


def test_single_entries_have_the_models_reasons(dedup):
    # (no third argument. With conflicts ignored, Spark makes the unordered statements' ledger rows from the files
    # its write staged, with no query; with ORDER BY it asks which ids it wrote in a query; test_payload_conflicts
    # has them judged)
    dedup.topic(dropped_entries="keys", payload_conflicts="ignore")
    model = SequenceTracker(Policies(), now=0.0)
    for rows, ordered in (([("a", 1), ("a", 2), ("a", 2), ("b", 4)], False),
                          ([("a", 2), ("a", 3), ("a", 3), ("c", 1), ("c", 1), ("b", 1), ("b", 4)], False),
                          ([("a", 7), ("a", 6), ("a", 7), ("e", 2), ("e", 1), ("b", 4)], True)):
        dedup.stage(rows)
        result = dedup.session.sql("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)"
                                   + (" ORDER BY arrival" if ordered else ""))
        assert ledger(dedup, result) == expected(model, [(p, s, None) for p, s in rows], ordered), rows
    # the ledger's rows carry the statement's commit and time, as its run log rows do
    assert dedup.session.sql(
        "SELECT count(*) FROM seqdedup_dropped d WHERE NOT EXISTS (SELECT 1 FROM seqdedup_statements s "
        "WHERE s.statement_id = d.statement_id AND s.commit_id = d.commit_id AND s.executed_at = d.dropped_at "
        "AND s.topic = d.topic)").rows[0][0] == 0


def dropped_rows(harness) -> int:
    return harness.session.sql("SELECT count(*) FROM seqdedup_dropped").rows[0][0]


def run_log_rows(harness) -> int:
    return harness.session.sql("SELECT count(*) FROM seqdedup_statements").rows[0][0]


@pytest.mark.parametrize("kept", ["nothing", "counts"])
def test_nothing_keeps_no_counts_and_counts_keep_no_ledger_row(dedup, kept):
    dedup.topic(dropped_entries=kept)
    result = dedup.send([("p", 1), ("p", 1), ("p", 0)])
    assert (result.written, result.duplicates) == (1, 2)        # the statement's own result counts either way
    assert dropped_rows(dedup) == 0 and result.dropped.empty
    assert run_log_rows(dedup) == (0 if kept == "nothing" else 1)


def test_rows_keep_each_dropped_entrys_values_and_keys_none(dedup):
    dedup.topic(dropped_entries="rows", payload_conflicts="ignore")     # (other payloads: R18's, see test_conflicts)
    dedup.send([("p", 1, None, "first")])
    frame = dedup.send([("p", 1, None, "again"), ("p", 2, None, "new"), ("p", 2, None, "twice")]).dropped
    assert sorted(zip(frame["sequence_id"], frame["reason"], frame["entry"])) == [
        (1, "retry", '{"payload":"again"}'), (2, "repeat", '{"payload":"twice"}')]
    dedup.session.alter_topic("events", dropped_entries="keys")
    frame = dedup.send([("p", 2, None, "late retry")]).dropped
    assert list(zip(frame["reason"], frame["entry"])) == [("retry", None)]


def test_the_ledger_keeps_its_retention_and_goes_with_its_topic(dedup):
    dedup.configure(PRUNE_SPACING=1)     # every full snapshot prunes (on Spark a small state's in batches)
    dedup.topic(dropped_entries="keys", snapshot_interval_entries=1, full_snapshot_interval=1,
                dropped_retention_minutes=5)
    dedup.send([("p", 0), ("p", 0)])
    dedup.clock.advance(minutes=6)
    dedup.send([("p", 1), ("p", 1)])            # a full snapshot: the ledger rows older than 5 minutes go
    adapter = dedup.session.adapter
    # (but where other drivers may append to the catalog without transactions, a Spark Connect session always:
    # a removal rewrites the table and would drop their rows, so nothing is pruned there: seqdedup/core/snapshots.py)
    pruned = adapter.SUPPORTS_TRANSACTIONS or adapter.exclusive
    assert sorted(dedup.session.sql("SELECT sequence_id FROM seqdedup_dropped").rows) == ([(1,)] if pruned
                                                                                         else [(0,), (1,)])
    dedup.session.drop_topic("events")
    assert dropped_rows(dedup) == 0


def test_a_ledger_policy_takes_only_the_words_it_knows(dedup):
    with pytest.raises(PolicyError, match="dropped_entries: expected one of nothing, counts, keys, rows"):
        dedup.topic(dropped_entries="everything")


def test_the_ledger_is_read_with_a_topic_a_producer_a_reason_and_a_limit_it_knows(dedup):
    dedup.topic(dropped_entries="keys")
    dedup.send([("p", 1), ("p", 1), ("p", 2), ("p", 2)])
    assert len(dedup.session.dropped("events", limit=1).rows) == 1
    assert dedup.session.dropped("events", limit=0).rows == []
    with pytest.raises(PolicyError, match="unknown reason 'retried'; the reasons are: retry, "):
        dedup.session.dropped("events", reason="retried")
    with pytest.raises(TopicError, match=r"limit=-1: give the number of rows to return, 0 or more"):
        dedup.session.dropped("events", limit=-1)        # (the engine's own error before: DuckDB's binder, Spark's)
    with pytest.raises(TopicError, match=r"producer=1: a producer's name is text; give it as a string \('1'\)"):
        dedup.session.dropped("events", producer=1)      # (the engine's conversion error before)
    for read in (dedup.session.dropped, dedup.session.gaps):     # (a misspelt topic read as one that dropped nothing)
        with pytest.raises(TopicError, match="unknown topic .*evnets; create it first"):
            read("evnets")
