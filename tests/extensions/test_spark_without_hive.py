"""Spark only: a SparkSession without a Hive catalog (``SparkSession.builder...getOrCreate()`` with no
``enableHiveSupport()``) cannot hold seqdedup's topics, and ``seqdedup.connect`` says so before it makes anything.

A process has one JVM and ``spark.sql.catalogImplementation`` is fixed when its first session starts, and the test
process's session has a Hive catalog: so the session without one lives in a child process (one JVM, some 20 s)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import seqdedup

pytestmark = pytest.mark.spark

#: The child: a session as the issue built it (fast settings aside), a connect, and what it left, as one JSON line.
#: The working folder is listed before Spark's catalog is asked anything: its first use makes ``spark-warehouse/``.
CHILD = textwrap.dedent("""
    import json, os, warnings
    from pyspark.sql import SparkSession
    import seqdedup

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "1")
             .getOrCreate())
    report = {"catalog": spark.conf.get("spark.sql.catalogImplementation")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            seqdedup.connect(spark)
            report["outcome"] = "connected"
        except Exception as error:
            report["outcome"] = f"{type(error).__name__}: {error}"
    report["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    report["left"] = sorted(os.listdir("."))
    report["tables"] = [t.name for t in spark.catalog.listTables()]
    report["guard"] = spark.catalog.functionExists("is_not_dup")
    spark.stop()
    print(json.dumps(report))
""")


def test_a_session_without_hive_support_is_refused_at_connect_and_leaves_nothing(tmp_path):
    child = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-4000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["catalog"] == "in-memory"          # (else nothing was tested)
    outcome = report["outcome"]
    assert outcome.startswith("EngineError: seqdedup needs a SparkSession with a Hive catalog"), outcome
    assert "this one's catalog is 'in-memory'" in outcome
    assert "SparkSession.builder.enableHiveSupport()" in outcome and 'seqdedup.connect(engine="spark")' in outcome
    assert "NOT_SUPPORTED_COMMAND_WITHOUT_HIVE_SUPPORT" not in outcome
    assert not [w for w in report["warnings"] if w.startswith("SeqdedupWarning")], report["warnings"]
    # nothing made: no folder (the catalog table's was made before Spark refused it), no table, no function
    assert report["left"] == [], report["left"]
    assert report["tables"] == [] and report["guard"] is False
    assert not (tmp_path / "spark-warehouse" / "producer_sequences").exists()
    assert not any((tmp_path / name).exists() for name in ("metastore_db", "derby.log", "seqdedup-spark"))


def test_a_spark_connect_session_without_hive_support_is_told_to_start_its_server_with_one():
    """The same check on a Spark Connect client, whose fix is on its server: ``_refuse_without_hive`` reads the
    setting as a client reads it, from ``spark.conf``. A stand-in client: no server (a JVM) for one setting."""
    class Conf:
        def get(self, key):
            assert key == "spark.sql.catalogImplementation"
            return "in-memory"

    client = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session", "conf": Conf()})()
    with pytest.raises(seqdedup.EngineError, match="this one's catalog is 'in-memory'") as refused:
        seqdedup.connect(client)
    assert "start the Spark Connect server with --conf spark.sql.catalogImplementation=hive" in str(refused.value)
    assert "seqdedup connect-server" in str(refused.value)
