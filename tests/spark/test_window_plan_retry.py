"""Spark 4.3 fails to run some window plans whole ("cannot assign instance of DefaultSerializationProxy", a window
over a cross join with a UNION ALL): the statement then reads its rows once into a table and decides from there
(``seqdedup.core.plans.window``). No source found today fails that way on every run, so the failure is injected
once, where the engine runs the plan; the retry must decide exactly what the one pass decides, and say that it
retried (at INFO on logger ``seqdedup``: a rescue that nobody sees hides a plan out of step with its statement)."""
from __future__ import annotations

import logging

import pytest

from seqdedup.errors import EngineError
from seqdedup.extensions.spark.commits import Commits

from ..engines import ENGINES, Harness

pytestmark = pytest.mark.spark


def test_a_window_plan_spark_cannot_run_whole_is_decided_again_over_its_rows_read_once(
        tmp_path_factory, monkeypatch, caplog):
    engine = next(e for e in ENGINES if e.name == "spark")
    harness = Harness(engine, str(tmp_path_factory.getbasetemp() / "spark-home"))
    try:
        session = harness.session
        session.create_topic("events", {"payload": "STRING"})
        # (a name of its own: other tests leave a temporary view named staging in the process's one SparkSession)
        session.sql("CREATE TABLE window_retry_source AS SELECT * FROM VALUES ('a', 1, 'x'), ('a', 2, 'y'), "
                    "('a', 2, 'y'), ('b', 5, 'z'), ('a', 1, 'x') AS t(producer, seq, payload)")
        real, calls = Commits.write_decided, []

        def fails_once(self, *args, **kwargs):
            calls.append(args[0])
            if len(calls) == 1:
                raise EngineError("Job aborted: cannot assign instance of scala.collection.generic."
                                  "DefaultSerializationProxy (injected)")
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Commits, "write_decided", fails_once)
        statement = "INSERT INTO events SELECT payload FROM window_retry_source WHERE is_not_dup(producer, seq)"
        with caplog.at_level(logging.INFO, logger="seqdedup"):
            first = session.sql(statement)
        assert len(calls) == 2
        rescued = [r.getMessage() for r in caplog.records if r.name == "seqdedup"]
        assert rescued == ["the window plan failed whole (Job aborted: cannot assign instance of scala.collection."
                           "generic.DefaultSerializationProxy (injected)); deciding from its rows read once"]
        assert [(p.producer, p.written, p.duplicates) for p in first.producers] == [("a", 2, 2), ("b", 1, 0)]
        rows = session.sql("SELECT _producer, _sequence_id, payload FROM events ORDER BY 1, 2").rows
        assert rows == [("a", 1, "x"), ("a", 2, "y"), ("b", 5, "z")]
        assert harness.position_problem() is None
        again = session.sql(statement)      # (the plan runs whole this time: every entry at or below its mark)
        assert [(p.producer, p.written, p.duplicates) for p in again.producers] == [("a", 0, 4), ("b", 0, 1)]
    finally:
        harness.close()
