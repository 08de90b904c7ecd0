"""Crash points for the kill tests: ``SEQDEDUP_CRASH_AT=<name>[:<n>]`` makes the process kill itself, and its
process group (the Spark driver JVM is a child of the Python process), with SIGKILL when it reaches
``failpoint(<name>)`` for the n-th time (the first by default).

This is how a test stops a real write at an exact step; nothing is cleaned up, as after ``kill -9``. The names:
``STATEMENT`` are the steps of a statement's commit, in order; ``after_output_rows`` is a consumer batch's step
before its position is written; the others are steps of snapshots, policy changes, topic creation and compaction
(see ``NAMES``), for the crash fuzzer (tests/crash/fuzz.py).

In-process tests use ``inject(name, fault)`` instead: the next time the failpoint is reached it raises ``fault``
when it is an exception (a fault whose outcome the caller cannot know, such as a lost connection), or calls it (to
hold a write at that step while another thread looks).
"""
from __future__ import annotations

import os
import signal

ENVIRONMENT = "SEQDEDUP_CRASH_AT"
#: The steps of a statement's commit, in order: its topic rows staged, its run log written, about to publish, done.
STATEMENT = ("after_topic_rows", "after_run_log", "before_publish", "after_publish")
NAMES = STATEMENT + (
    "after_output_rows",     # a consumer batch: output rows written, its position not yet
    "after_snapshot_rows",   # a snapshot's rows written (a statement's, a purge's, a policy change's), not published
    "before_prune",          # a full snapshot written; the snapshots it makes unneeded not yet removed (DuckDB: in
                             # its commit, before publishing; Spark: published, before the removal)
    "during_prune",          # the unneeded snapshots removed, the run log past its retention not yet
    "after_policy_rows",     # a policy change recorded, the state not yet made to follow it
    "after_topic_table",     # a new topic's table created, not yet registered
    # a compaction (Spark; seqdedup/core/compaction.py): the merged rows written, nothing switched to them yet; the last
    # partition switched to them, the others not dropped yet; the others dropped, the last one's old files not yet
    "compact_after_write", "compact_after_switch", "compact_after_drop",
)


_reached: dict[str, int] = {}
_injected: dict[str, list] = {}


def inject(name: str, *faults) -> None:
    """Raise (an exception) or call (a function) each of ``faults`` in turn, one per time ``failpoint(name)`` is
    reached, in this process."""
    _injected.setdefault(name, []).extend(faults)


def failpoint(name: str) -> None:
    if _injected.get(name):
        fault = _injected[name].pop(0)
        if isinstance(fault, BaseException):
            raise fault
        fault()
        return
    target, _, nth = os.environ.get(ENVIRONMENT, "").partition(":")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != int(nth or 1):
        return
    if os.getpgid(0) == os.getpid():   # leads its own group (the test started it so): take the JVM down too
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
