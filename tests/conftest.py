"""One behaviour suite, every engine: the ``engine`` and ``dedup`` fixtures, and gaps written as data.

A known gap is ``@pytest.mark.notyet(["spark"], reason="...")`` on the test: on those engines the test becomes a
strict expected failure, so a gap that closes is noticed. Nothing here skips an engine.
"""
from __future__ import annotations

import os
import time

import duckdb
import pytest
import sqlglot

from . import engines, jvm
from .engines import ENGINES, Harness

#: Spark Connect ("connect") runs the behaviour suite (tests/behaviour) whole when SEQDEDUP_CONNECT=all (about
#: three times Spark's time: more than CI's budget on 2 cores); otherwise only its tests marked ``connect_ci``. The
#: others on it are deselected (pytest counts them, and the header says how to run them). Tests outside the behaviour
#: suite (crashes, processes, faults) start engines in child processes of their own: classic sessions, but for the
#: tests marked ``connect`` without the engine fixture, which start Spark Connect clients and run as the suite's do.
CONNECT_ALL = os.environ.get("SEQDEDUP_CONNECT") == "all"


#: The class-data archive being built while the tests run (the first run in an environment), in the controller.
_archive: jvm.Build | None = None


def pytest_configure(config):
    # Every JVM started from here inherits the short-lived drivers' settings (tests/jvm.py) except the test
    # process's own session (tests/engines.py). The class-data archive is built once per environment, in the
    # background: the first modules handed out start no driver process (``pytest_collection_modifyitems``).
    global _archive
    if not hasattr(config, "workerinput"):
        _archive = jvm.start_archive()
    jvm.prepare(build=False)
    # pytest-xdist would hand out modules by their number of tests, most first: the crash modules, a test or two of
    # minutes each, were handed out last. The modules go in the order collected (MODULE_SECONDS).
    config.option.loadscopereorder = False


def pytest_report_header(config):
    return [f"seqdedup engines: {', '.join(e.name for e in ENGINES)}; duckdb {duckdb.__version__}, "
            f"sqlglot {sqlglot.__version__}",
            "Spark Connect: " + ("the whole behaviour suite" if CONNECT_ALL else
                                 "the tests marked connect_ci (SEQDEDUP_CONNECT=all runs the behaviour suite and "
                                 "the tests marked connect on it)")]


def _runs(item) -> bool:
    engine = getattr(getattr(item, "callspec", None), "params", {}).get("engine")
    if engine is not None:
        if getattr(engine, "name", None) != "connect":
            return True
        if "behaviour" not in item.path.parts:
            return False
    elif item.get_closest_marker("connect") is None:
        return True
    return CONNECT_ALL or item.get_closest_marker("connect_ci") is not None


#: Seconds each of the longest modules took in a run like `.ci/run`'s (both engines, two workers on 2 cores,
#: 2026-11-29 at 409f6a8, with other work beside it: the sums of its tests' setup, call and teardown). The modules
#: run longest first: ``--dist loadfile`` hands modules to the workers in the order collected (pytest_configure), and
#: one that starts last and runs for minutes keeps the other worker idle till it ends. A stale figure only makes the
#: schedule worse; a module not listed runs after those listed.
MODULE_SECONDS = {
    "tests/behaviour/test_conformance.py": 593,
    "tests/behaviour/test_hostile_input.py": 476,
    "tests/crash/test_fuzz.py": 382,
    "tests/behaviour/test_matches_reference.py": 372,
    "tests/behaviour/test_compaction.py": 275,
    "tests/crash/test_kill.py": 273,
    "tests/behaviour/test_recover_against_the_log.py": 222,
    "tests/behaviour/test_dropped_ledger.py": 160,
    "tests/crash/test_publish_file_kill.py": 213,
    "tests/behaviour/test_producer.py": 208,
    "tests/concurrency/test_drivers.py": 240,
    "tests/test_cli.py": 156,
    "tests/crash/test_driver_kills.py": 148,
    "tests/behaviour/test_statement_edge_cases.py": 135,
    "tests/behaviour/test_user_facing_edge_cases.py": 124,
    "tests/crash/test_consumer_kill.py": 123,
    "tests/crash/test_cdc_kill.py": 90,
    "tests/behaviour/test_composite_ids.py": 105,
    "tests/behaviour/test_producer_batching.py": 110,
    "tests/behaviour/test_logging.py": 100,
    "tests/crash/test_send_async_kill.py": 100,
    "tests/behaviour/test_snapshot_chain.py": 94,
    "tests/faults/test_read_only_files.py": 82,
    "tests/behaviour/test_foreign_rows.py": 77,
    "tests/concurrency/test_processes.py": 75,
    "tests/concurrency/test_threads.py": 75,
    "tests/behaviour/test_sources_read_again.py": 75,
    "tests/behaviour/test_kafka.py": 72,
    "tests/behaviour/test_consumer.py": 71,
    "tests/dbt/test_spark_processes.py": 70,
    "tests/behaviour/test_unreadable_policy_rows.py": 67,
    "tests/faults/test_catalog.py": 64,
    "tests/test_cli_disabling_deduplication.py": 60,
    "tests/test_cli_remote.py": 60,
    "tests/dbt/test_duckdb_processes.py": 58,
    "tests/spark/test_streaming.py": 53,
    "tests/behaviour/test_report.py": 60,
    "tests/behaviour/test_rewrite_fuzz.py": 51,
    "tests/behaviour/test_functions.py": 46,
}


#: Modules whose tests start Spark driver processes. pytest-xdist hands each worker one module first: those two are
#: modules that start none, so that the drivers start once the class-data archive is written (about two minutes on
#: a new environment, beside the tests).
STARTS_DRIVERS = ("tests/crash/", "tests/concurrency/", "tests/faults/test_read_only_files.py", "tests/test_cli.py",
                  "tests/test_cli_remote.py", "tests/extensions/test_spark_without_hive.py",
                  "tests/dbt/test_spark_processes.py")


def _module_order() -> dict[str, int]:
    """Each module's place: the longest first, but for the first two, which start no driver process."""
    longest = sorted(MODULE_SECONDS, key=lambda module: -MODULE_SECONDS[module])
    first = [module for module in longest if not module.startswith(STARTS_DRIVERS)][:2]
    return {module: place for place, module in enumerate(first + [m for m in longest if m not in first])}


def pytest_collection_modifyitems(config, items):
    left = [item for item in items if not _runs(item)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if _runs(item)]
    order = _module_order()
    items.sort(key=lambda item: order.get(item.nodeid.split("::")[0], len(order)))   # (stable: in a module, as written)


def _on_connect(nodeid: str) -> bool:
    """Whether a test runs on Spark Connect (the ``engine`` fixture's ``connect``)."""
    return "[connect" in nodeid


def _connect_grouped(config) -> bool:
    """Whether the modules with tests on Spark Connect run in a row on one worker (``Scheduling``): under
    ``--dist loadfile``, unless SEQDEDUP_CONNECT=all (then that would be the whole behaviour suite)."""
    return config.getoption("dist") == "loadfile" and not CONNECT_ALL


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, but the modules with tests on Spark Connect go to one worker: each worker that runs one
    starts a Connect server of its own (``tests/engines.py``), 20 s and more of its JVM warming up on a busy machine."""
    if not _connect_grouped(config):
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            if not hasattr(self, "_connect"):       # (the collection is known from the first call on)
                self._connect = {super(Scheduling, self)._split_scope(n) for n in self.collection if _on_connect(n)}
            return "the modules on Spark Connect" if module in self._connect else module

    return Scheduling(config, log)


#: Set in each worker where the modules with tests on Spark Connect run in a row on one worker (``Scheduling``).
CONNECT_GROUPED = "seqdedup_connect_grouped"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput[CONNECT_GROUPED] = _connect_grouped(node.config)


@pytest.hookimpl(trylast=True)       # after the module's fixtures are torn down (their sessions closed)
def pytest_runtest_teardown(item, nextitem):
    """Where the modules with tests on Spark Connect run in a row (``pytest_xdist_make_scheduler``), stop the
    server once the next module has none, rather than leave it idle beside the other tests till the worker ends.
    (Elsewhere they are spread among the others, and the server stays up.)"""
    if (engines.connect_started() and nextitem is not None and nextitem.path != item.path
            and getattr(item.config, "workerinput", {}).get(CONNECT_GROUPED)
            and not any(_on_connect(other.nodeid) for other in item.session.items if other.path == nextitem.path)):
        engines.stop_connect()


_STARTED = time.monotonic()
_busy: dict[str, list[float]] = {}      # worker -> [seconds in its tests, when its last test ended]


def pytest_runtest_logreport(report):
    worker = getattr(report, "worker_id", None)         # (set where pytest-xdist runs the tests)
    if worker:
        busy = _busy.setdefault(worker, [0.0, 0.0])
        busy[0] += report.duration
        busy[1] = time.monotonic()


def pytest_terminal_summary(terminalreporter):
    """How busy each worker was and when it ran out of work: a worker idle long before the other is a schedule
    to fix (``MODULE_SECONDS``), not a slower test."""
    if _archive is not None:
        code = _archive.process.poll()
        terminalreporter.write_line(
            "class-data archive for Spark's drivers: " + ("still being written" if code is None else
                                                          "written" if code == 0 else _archive.failure()))
    if _busy:
        terminalreporter.write_line("workers: " + "; ".join(
            f"{worker} {busy:.0f} s in tests, done after {ended - _STARTED:.0f} s"
            for worker, (busy, ended) in sorted(_busy.items())))


@pytest.fixture(params=[pytest.param(e, marks=getattr(pytest.mark, e.name), id=e.name) for e in ENGINES])
def engine(request):
    marker = request.node.get_closest_marker("notyet")
    if marker is not None and {request.param.name, request.param.family} & set(marker.args[0]):
        request.applymarker(pytest.mark.xfail(reason=marker.kwargs.get("reason", "known gap"), strict=True,
                                              raises=marker.kwargs.get("raises")))
    return request.param


@pytest.fixture
def dedup(engine, tmp_path, tmp_path_factory):
    home = tmp_path_factory.getbasetemp() / "spark-home"
    harness = Harness(engine, str(home if engine.family == "spark" else tmp_path / "seqdedup.duckdb"))
    yield harness
    harness.close()
