"""One behaviour suite, every engine: the ``engine`` and ``dedup`` fixtures, and gaps written as data.

A known gap is ``@pytest.mark.notyet(["spark"], reason="...")`` on the test: on those engines the test becomes a
strict expected failure, so a gap that closes is noticed. Nothing here skips an engine.
"""
from __future__ import annotations

import os

import duckdb
import pytest
import sqlglot

from . import jvm
from .engines import ENGINES, Harness

#: Spark Connect ("connect") runs the behaviour suite (tests/behaviour) whole when SEQDEDUP_CONNECT=all (about
#: three times Spark's time: more than CI's budget on 2 cores); otherwise only its tests marked ``connect_ci``. The
#: others on it are deselected (pytest counts them, and the header says how to run them). Tests outside the behaviour
#: suite (crashes, processes, faults) start engines in child processes of their own: classic sessions, but for the
#: tests marked ``connect`` without the engine fixture, which start Spark Connect clients and run as the suite's do.
CONNECT_ALL = os.environ.get("SEQDEDUP_CONNECT") == "all"


def pytest_configure(config):
    # Every JVM started from here inherits the short-lived drivers' settings (tests/jvm.py) except the test
    # process's own session (tests/engines.py). The class-data archive is built once, before any worker starts.
    jvm.prepare(build=not hasattr(config, "workerinput"))


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


def pytest_collection_modifyitems(config, items):
    left = [item for item in items if not _runs(item)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if _runs(item)]


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
