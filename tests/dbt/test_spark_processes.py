"""The example dbt project on Spark in a dbt process of its own, run in the project's folder as a user runs it: dbt
starts the JVM through the seqdedup_spark adapter, which builds the SparkSession. So this is where a run's console
and files show: Spark logs errors only, from the JVM's start (no WARN line, no Java stack trace, ``dbt docs
generate`` included), the Derby metastore leaves no ``derby.log`` in the folder, and ``dbt build --full-refresh`` of
the whole project runs the topic as usual instead of failing it."""
from __future__ import annotations

import json
import re

import pytest

from .project import Project

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: A log4j line of Spark's below ERROR (``26/11/29 01:40:00 WARN NativeCodeLoader: ...``), and a Java stack frame.
#: With Spark's own log4j2 defaults, the JVM's start logs three WARN lines before spark.log.level applies (a hostname
#: that resolves to a loopback address, no native Hadoop library); seqdedup's log4j2 configuration leaves them out.
WARN = re.compile(r"^\S+ \S+ (?:WARN|INFO|DEBUG|TRACE) \S+:.*", re.M)
FRAME = re.compile(r"^\s+at [\w$.]+\(", re.M)
#: What Spark prints as the JVM starts where its log4j2 configuration is Spark's defaults, not seqdedup's.
SPARK_DEFAULTS = re.compile(r"^(?:Using Spark's default log4j profile|Setting default log level|Setting Spark log "
                            r"level).*", re.M)


def test_a_spark_dbt_process_is_quiet_leaves_no_file_and_builds_with_full_refresh(tmp_path):
    # The profile's Spark home is relative (spark-home, in the example's .gitignore): the process's folder is the
    # project's, and the schema is the test's own.
    project = Project.copy(tmp_path, target="spark", SEQDEDUP_EXAMPLE_SPARK_SCHEMA="dbt_process")
    before = {path.name for path in project.path.iterdir()}
    done = project.dbt_session_process(["build"], ["build", "--full-refresh"], ["docs", "generate"])
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    built, refreshed, _ = [json.loads(line.split(" ", 2)[2]) for line in done.stdout.splitlines()
                           if line.startswith("RESULTS ")]

    # --full-refresh: the seed and the plain models are rebuilt, the topic runs as usual and writes no retry again.
    assert built["events"][1].startswith("INSERT 9 (duplicates 4, commit ")
    assert refreshed["events"][0] == "success" and refreshed["events"][1].startswith("INSERT 0 (duplicates 13, ")
    assert refreshed["seqdedup_seqdedup_unique_entries_events_"][:1] == ["pass"]
    assert output.count("--full-refresh skipped, the producers' marks are kept") == 1

    # Quiet: no WARN line and no stack trace from Spark, Hive or Derby in three commands, the JVM's start included
    # (45 WARN lines a build before spark.log.level, 3 before seqdedup's log4j2 configuration).
    assert not WARN.findall(output), WARN.findall(output)
    assert not SPARK_DEFAULTS.findall(output), SPARK_DEFAULTS.findall(output)
    assert not FRAME.search(output), output[FRAME.search(output).start() - 2000:][:4000]

    # No file left in the project's folder: the warehouse, the metastore and derby.log are in the Spark home.
    assert {path.name for path in project.path.iterdir()} - before <= {"spark-home", "logs"}
    assert not {"derby.log", "metastore_db", "spark-warehouse"} & {path.name for path in project.path.iterdir()}
    assert (project.path / "spark-home" / "derby.log").exists()
