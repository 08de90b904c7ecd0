"""How the tests start Spark's JVMs: dozens of short-lived drivers (a crash test's processes) and one long-lived one
per test process.

A fresh driver spends most of its start loading and verifying Spark's classes (about 15,000). Java's class-data
sharing keeps them in an archive mapped at start instead: the archive is written once per virtual environment by a
driver that does what the tests do (``build``: a Hive catalog, a topic, statements), and every later driver maps it.
Measured on 2 cores under load: 25 s of CPU for a process that opens a session on an existing home and writes one
statement, against 37 s without it. A JVM whose class path differs from the archive's (spark-submit's launcher)
cannot use it and starts as before; one whose class path extends it (PostgreSQL's JDBC driver at the end) can.

    python tests/jvm.py ARCHIVE      builds the archive (./dev fuzz and ./dev fuzz-drivers do it when it is
                                     missing; tests/conftest.py starts it in the background)

A JVM names the archive whether it is written yet or not: one started before it is there runs without it. So a test
run on a new environment starts its tests while the archive is written beside them (about a minute of one core,
which the tests would otherwise wait for with the other core idle).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The short-lived drivers run a few small queries: the JIT's first tier alone starts them about a third faster
#: (19 s -> 12 s for a process that opens a session and writes one statement), and the serial collector suits a
#: 2-core machine. ``-Xlog:disable``: a JVM that cannot map the archive says so on standard output, which some
#: tests read.
SHORT_LIVED = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: The JVM of a test worker runs the suite's thousands of small queries, each with code Spark generates for it: with
#: the defaults, the JIT's second tier took half of its CPU (128 of 264 s in `pytest
#: tests/behaviour/test_conformance.py -m spark`), and the tests run on two saturated cores. Compiling only what runs
#: ten times as often, with the serial collector: 198 s of CPU in the same wall time (165 s); the ten-million-row
#: hostile-input test 96 -> 85 s of CPU, 64 -> 66 s wall. The first tier alone, as the short-lived drivers run, is
#: worse here: 255 s of CPU against 200 s (the same module, 2026-11-27), the queries' code staying slow.
LONG_LIVED = ("-XX:+UseSerialGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
              "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")


def archive() -> Path:
    """Where this environment's archive lives: beside the installed pyspark, named after its version and the JVM's
    (an archive from another JVM build is refused by the JVM, so a new name avoids a useless one)."""
    import pyspark

    java = Path(shutil.which("java") or "java").resolve()
    return Path(sys.prefix) / f"seqdedup-spark-{pyspark.__version__}-{java.parent.parent.name}.jsa"


def options(*, long_lived: bool = False) -> str:
    """JAVA_TOOL_OPTIONS for a driver: the short-lived settings unless ``long_lived``, and the archive (mapped if it
    is there when the JVM starts)."""
    sharing = f"-XX:SharedArchiveFile={archive()} -Xlog:disable"
    return f"{LONG_LIVED if long_lived else SHORT_LIVED} {sharing}"


def prepare(*, build: bool = True) -> None:
    """Every JVM this process starts from now on gets the short-lived drivers' settings (``JAVA_TOOL_OPTIONS``,
    unless set already), with the archive, built first unless ``build`` is false."""
    if build:
        ensure_archive()
    os.environ.setdefault("JAVA_TOOL_OPTIONS", options())
    # The drivers on a shared metastore need PostgreSQL's JDBC driver. At the end of the class path (Spark's
    # launcher appends SPARK_DIST_CLASSPATH), the archive still serves them: the JVM accepts a class path that
    # extends the archive's, not one that differs in front (spark.driver.extraClassPath). A driver that opens a
    # session on the shared metastore and writes one statement: 37 -> 24 s of CPU.
    from seqdedup.extensions.spark import POSTGRESQL_JAR

    present = os.environ.get("SPARK_DIST_CLASSPATH", "")
    if Path(POSTGRESQL_JAR).is_file() and POSTGRESQL_JAR not in present.split(os.pathsep):
        os.environ["SPARK_DIST_CLASSPATH"] = os.pathsep.join(p for p in (present, POSTGRESQL_JAR) if p)


def ensure_archive() -> None:
    """Build the archive unless it is there: one Spark process of about a minute, once per environment. A build
    that fails leaves no archive (the drivers then run without one, slower) and says why on standard error."""
    build = start_archive()
    if build is not None and build.process.wait(timeout=900):
        print(build.failure(), file=sys.stderr)


@dataclass
class Build:
    """A build of the archive running in the background; its output goes to a log beside the archive."""
    process: subprocess.Popen
    log: Path

    def failure(self) -> str:
        """Why the build failed, for a report."""
        return (f"tests/jvm.py: no class-data archive for Spark ({self.process.returncode}; {self.log}): "
                f"{self.log.read_text()[-2000:]}")


def start_archive() -> Build | None:
    """Start building the archive unless it is there (or Java is missing): in a process of its own, which goes on
    if this one ends first."""
    target = archive()
    if target.is_file() or not shutil.which("java"):
        return None
    log = target.with_suffix(".log")
    with open(log, "w") as output:
        process = subprocess.Popen([sys.executable, __file__, str(target)], stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return Build(process, log)


def _remove_abandoned(target: Path) -> None:
    """Remove the partial archives (about 200 MB each) of builds that were killed: those whose process is gone. A
    build still running keeps its file."""
    for partial in target.parent.glob(f"{target.stem}.*.partial"):
        pid = partial.name[len(target.stem) + 1:-len(".partial")]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            partial.unlink(missing_ok=True)
        except (ValueError, PermissionError):      # not a build's name, or another user's live process
            pass


def _train(target: Path) -> None:
    """Run what the tests' drivers run, in a JVM that writes the classes it loaded to ``target`` when it exits."""
    _remove_abandoned(target)
    partial = target.with_suffix(f".{os.getpid()}.partial")     # (two builds at once write two files)
    os.environ["JAVA_TOOL_OPTIONS"] = f"{SHORT_LIVED} -XX:ArchiveClassesAtExit={partial} -Xlog:disable"
    import seqdedup
    from seqdedup.extensions.spark import local_session

    with tempfile.TemporaryDirectory() as home:
        spark = local_session(home)
        session = seqdedup.connect(spark)
        session.create_topic("events", {"payload": "STRING"}, snapshot_interval_entries=3)
        spark.sql("SELECT 'p' || (id % 3) AS producer, id AS seq, 'x' AS payload FROM range(20)") \
            .createOrReplaceTempView("staging")
        for order in ("", " ORDER BY seq"):
            session.sql(f"INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq){order}")
        session.sql("SELECT count(*) FROM events").rows
        session.producer_state("events").rows
        session.close()
        gateway = spark.sparkContext._gateway.proc
        spark.stop()
        gateway.stdin.close()           # the driver exits at the end of its standard input, writing the archive
        gateway.wait(timeout=300)
    partial.rename(target)


if __name__ == "__main__":
    _train(Path(sys.argv[1]))
