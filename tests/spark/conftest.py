"""The Spark-only tests' fixture: a fresh namespace on the test process's one SparkSession."""
from __future__ import annotations

import pytest

from ..engines import ENGINES, Harness


@pytest.fixture
def spark_dedup(tmp_path_factory):
    """A fresh namespace on the test process's one SparkSession (the behaviour suite's, when both run)."""
    engine = next(e for e in ENGINES if e.name == "spark")
    harness = Harness(engine, str(tmp_path_factory.getbasetemp() / "spark-home"))
    harness.session.create_topic("events", {"payload": "STRING"})
    yield harness
    harness.close()
