"""The two-level marks (seqdedup/core/marks.py) agree with a plain dict of producer -> (highest id, latest write),
through any sequence of folds, whichever level a producer's mark sits in and however often the levels merge."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqdedup.core import marks as m

NAMES = [f"p{i}" for i in range(12)] + ["", "é", "ü", "Z"]     # byte order and code point order agree
START = dt.datetime(2026, 1, 1)

delta = st.dictionaries(st.sampled_from(NAMES), st.tuples(st.integers(0, 50), st.integers(0, 100)), max_size=6)


def table(rows: dict) -> pa.Table:
    return m.marks_table(pa.table({
        "producer": pa.array(list(rows), pa.string()),
        "sequence_id": pa.array([s for s, _ in rows.values()], pa.int64()),
        "last_publish_time": pa.array([START + dt.timedelta(minutes=t) for _, t in rows.values()],
                                      pa.timestamp("us"))}))


def as_dict(marks: pa.Table) -> dict:
    return {p: (s, round((t - START).total_seconds() / 60)) for p, s, t in zip(
        *(marks.column(c).to_pylist() for c in m.MARKS.names))}


# (base searched through its sorted names above this many rows, fresh merged in above 1/fraction of it, folded by
# NumPy up to this many rows): a large base never merged (0), merged once fresh outgrows it (1), merged at almost
# every fold (1000); a small state (a hash probe, a merge at every fold); each folded by Arrow's group-by, and the
# last two by NumPy as a small state is by default
LEVELS = [(0, 0, 0), (0, 1, 0), (0, 1000, 0), (10_000, 8, 0), (0, 1, m.FOLDED_BY_NUMPY), (10_000, 8, m.FOLDED_BY_NUMPY)]


@settings(max_examples=200, deadline=None)
@given(levels=st.sampled_from(LEVELS), start=delta, folds=st.lists(delta, max_size=8),
       asked=st.lists(st.sampled_from(NAMES + ["absent"])))
def test_marks_agree_with_a_dict(levels, start, folds, asked):
    searched_above, merge_fraction, by_numpy = levels
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(m, "SEARCHED_ABOVE", searched_above)
        patch.setattr(m, "MERGE_FRACTION", merge_fraction)
        patch.setattr(m, "FOLDED_BY_NUMPY", by_numpy)
        marks, model = m.Marks.of(table(start)), dict(start)
        for rows in folds:
            marks = marks.folded(table(rows))
            for producer, (seq, minute) in rows.items():
                old = model.get(producer, (-1, -1))
                model[producer] = (max(old[0], seq), max(old[1], minute))
            found = marks.lookup(pa.array(sorted(set(asked)), pa.string()))
            assert as_dict(found) == {p: model[p] for p in set(asked) if p in model}
            assert marks.num_rows == len(model)
            oldest = marks.oldest()
            assert oldest == (START + dt.timedelta(minutes=min(t for _, t in model.values())) if model else None)
        assert as_dict(marks.table) == model and marks.table.num_rows == len(model)
