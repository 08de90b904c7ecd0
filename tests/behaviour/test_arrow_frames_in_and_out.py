"""DataFrames in and out through Arrow's PyCapsule interface, on every engine: a polars frame, a DuckDB relation or
anything else with ``__arrow_c_stream__`` is read by name as a pandas one is, and results come back as polars."""
from __future__ import annotations

import pytest

from seqdedup import SeqdedupError, TopicError
from seqdedup.core.results import QueryResult

INSERT = "INSERT INTO events SELECT payload FROM {} WHERE is_not_dup(producer, seq) ORDER BY producer, payload"


def _entries(producer: str) -> dict:
    """Three entries of one producer, the second a repeat of the first."""
    return {"producer": [producer] * 3, "seq": [1, 1, 2], "payload": ["a", "b", "c"]}


@pytest.mark.connect_ci
def test_a_polars_frame_is_read_by_name_and_results_come_back_as_polars(dedup):
    import polars as pl

    dedup.topic()
    frame = pl.DataFrame({"producer": ["p", "p", "q"], "seq": [1, 1, 2], "payload": ["a", "b", "c"]})
    result = dedup.session.sql(INSERT.format("staging"), staging=frame)
    assert (result.written, result.duplicates) == (2, 1)
    counts = result.to_polars()
    assert isinstance(counts, pl.DataFrame)
    assert counts.select("producer", "written", "duplicates").rows() == [("p", 1, 1), ("q", 1, 0)]
    dedup.session.register("again", frame)
    try:
        assert dedup.session.sql(INSERT.format("again")).duplicates == 3
    finally:
        dedup.session.unregister("again")          # (a Spark session outlives the test: its views would too)
    with dedup.session.producer("events", name="r") as producer:     # a producer sends a polars frame too
        assert producer.send(pl.DataFrame({"payload": ["d", "e"]})).written == 2
    events = dedup.session.sql("SELECT _producer, _sequence_id, payload FROM events ORDER BY _producer, payload")
    assert events.to_polars().rows() == [("p", 1, "a"), ("q", 2, "c"), ("r", 0, "d"), ("r", 1, "e")]
    nested = pl.DataFrame({"tags": [["y", "z"], ["x"]]})        # polars' strings inside a list (Arrow views)
    assert dedup.session.sql("SELECT tags FROM nested ORDER BY size(tags)", nested=nested).rows == [
        (["x"],), (["y", "z"],)]


class _ArrowStream:
    """Only the Arrow PyCapsule interface: what a library seqdedup does not know hands out."""

    def __init__(self, table):
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)


def _sources() -> dict:
    """The same three entries, each under a producer named after what carries them."""
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    stored = pd.DataFrame({"producer": ["pandas_filtered"] * 4, "seq": [0, 1, 1, 2], "payload": ["z", "a", "b", "c"]})
    batches = pa.table(_entries("arrow_batches"))
    return {
        "polars": pl.DataFrame(_entries("polars")),
        "duckdb_relation": duckdb.connect().from_arrow(pa.table(_entries("duckdb_relation"))),
        "arrow_stream": _ArrowStream(pa.table(_entries("arrow_stream"))),
        "arrow_batches": pa.RecordBatchReader.from_batches(batches.schema, batches.to_batches()),
        "pandas_filtered": stored[stored.seq > 0],       # an index of its own (1, 2, 3), which is no column
    }


def test_any_table_with_the_arrow_stream_interface_is_read_by_name(dedup):
    dedup.topic()
    for kind, source in _sources().items():
        result = dedup.session.sql(INSERT.format("staging"), staging=source)
        assert (kind, result.written, result.duplicates) == (kind, 2, 1)
    dedup.session.register("columns", _sources()["pandas_filtered"])
    try:
        assert dedup.session.sql("SELECT * FROM columns").columns == ["producer", "seq", "payload"]
    finally:
        dedup.session.unregister("columns")
    assert dedup.session.sql("SELECT DISTINCT _producer FROM events ORDER BY _producer").to_polars()[
        "_producer"].to_list() == sorted(_sources())


def test_a_lazy_frame_or_a_column_is_refused_naming_what_to_give(dedup):
    import polars as pl

    dedup.topic()
    frame = pl.DataFrame(_entries("p"))
    with pytest.raises(TopicError, match=r"cannot register LazyFrame as 'staging'; collect\(\) it first: give a "
                                         r"pandas, polars or Spark DataFrame"):
        dedup.session.register("staging", frame.lazy())
    with pytest.raises(TopicError, match="the Series given offers Arrow data that is no table .*; give a table of "
                                         "named columns, such as a polars or pandas DataFrame"):
        dedup.session.sql(INSERT.format("staging"), staging=frame["payload"])
    assert dedup.entries() == []


def test_to_polars_without_polars_says_how_to_get_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "polars", None)        # (an import of it raises ImportError)
    with pytest.raises(SeqdedupError, match=r"to_polars\(\) needs polars, which is not installed: pip install polars"):
        QueryResult(columns=["a"], rows=[(1,)]).to_polars()
