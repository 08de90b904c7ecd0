"""The oracle checks the engines: generated statements with repeats, holes, disorder, batch entries, straddles,
restarts and disable/enable, run on an engine and on the reference model; after every step the topic contents,
the marks, the status of every id, and the per-producer counts of every statement (written, duplicates, out of
order) must agree."""
from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from seqdedup.udfs import Entry, Policies, SequenceTracker

from ..engines import DISTRIBUTED, Harness

PRODUCERS = ["a", "b", "c"]

entry = st.builds(
    lambda p, s, width: (p, s, s + width if width is not None else None),
    st.sampled_from(PRODUCERS), st.integers(0, 15), st.one_of(st.none(), st.integers(0, 4)),
)
statement = st.tuples(st.lists(entry, min_size=0, max_size=8), st.booleans())   # entries in arrival order, ordered?
step = st.one_of(
    statement.map(lambda s: ("send", s)),
    st.just(("restart", None)),
    st.sampled_from([("disable", None), ("enable", None)]),
)
steps = st.lists(step, min_size=1, max_size=6).filter(
    lambda ss: sum(kind == "send" for kind, _ in ss) >= 1)


IDS = [(p, s) for p in PRODUCERS for s in range(0, 21)]
STATUS_QUERY = ("SELECT p, s, dup_status('events', p, s) FROM VALUES "
                + ", ".join(f"('{p}', {s})" for p, s in IDS) + " AS ids(p, s)")


def _statuses(harness) -> dict[tuple[str, int], str]:
    """The engine's dup_status of every id the test can send, in one query."""
    return {(p, s): status for p, s, status in harness.session.sql(STATUS_QUERY).rows}


def _counts(result) -> dict[str, tuple[int, int, int]]:
    return {p.producer: (p.written, p.duplicates, p.out_of_order) for p in result.producers
            if p.written or p.duplicates}


def _model_counts(result, rows, marks: dict[str, int] | None) -> dict[str, tuple[int, int, int]]:
    """Written, duplicates and out of order per producer. Out of order (results.py): the distinct lowest ids above
    the mark the statement began with that no entry was written with; every written entry has its own lowest id.
    With deduplication disabled (``marks`` None) nothing is dropped, so nothing is out of order."""
    names = set(result.written) | set(result.duplicates)
    counts = {}
    for p in names:
        written = result.written.get(p, 0)
        ids = {s for q, s, _ in rows if q == p and s > (marks or {}).get(p, -1)}
        counts[p] = (written, result.duplicates.get(p, 0), len(ids) - written if marks is not None else 0)
    return {p: c for p, c in counts.items() if c[:2] != (0, 0)}


#: Examples per run: Spark runs each statement as a handful of jobs, so it gets fewer.
EXAMPLES = {"duckdb": 120, "spark": 8, "connect": 8}


def test_engine_matches_the_reference_model(engine, tmp_path_factory):
    @settings(max_examples=EXAMPLES[engine.name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow], derandomize=engine.family == "spark")
    @given(steps=steps, interval=st.sampled_from([1, 2, 3, 1000]), distributed=st.booleans())
    def check(steps, interval, distributed):
        where = tmp_path_factory.getbasetemp() / "spark-home" if engine.family == "spark" else \
            tmp_path_factory.mktemp("prop") / "p.duckdb"
        # (distributed: the way a large statement is decided, which these small ones would not take otherwise)
        harness = Harness(engine, str(where), adapter=DISTRIBUTED if distributed else {})
        try:
            run(harness, steps, interval)
        finally:
            harness.close()

    check()


def run(harness, steps, interval):
    harness.topic(snapshot_interval_entries=interval)
    model = SequenceTracker(Policies(snapshot_interval_entries=interval), now=0.0)
    enabled = True
    for kind, arg in steps:
        if kind == "send":
            rows, ordered = arg
            result = harness.send(rows, ordered=ordered)
            entries = [Entry(p, s, h) for p, s, h in rows]
            marks = model.state() if enabled else None
            expected = model.apply_statement(entries, order=list(range(len(rows))) if ordered else None)
            assert _counts(result) == _model_counts(expected, rows, marks), (rows, ordered)
        elif kind == "restart":
            harness.restart()
            model = model.recover()
        elif kind in ("disable", "enable") and (kind == "enable") != enabled:
            enabled = kind == "enable"
            harness.session.alter_topic("events", deduplication_enabled=enabled)
            model.disable() if not enabled else model.enable()
        # the same entries, statement by statement (a statement's positions have no order among themselves)
        engine_entries = harness.entries()
        model_entries = [(e.producer, e.sequence_id, e.highest_sequence_id) for e in model.log]
        assert sorted(engine_entries) == sorted(model_entries)
        assert harness.position_problem() is None      # unique, increasing in commit order
        for producer in PRODUCERS:
            assert harness.last(producer) == model.last_sequence_id(producer), producer
        assert _statuses(harness) == {(p, s): model.dup_status(p, s).value for p, s in IDS}
