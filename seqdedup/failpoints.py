"""Crash points for the kill tests: ``SEQDEDUP_CRASH_AT=<name>[:<n>]`` makes the process kill itself, and its
process group (the Spark driver JVM is a child of the Python process), with SIGKILL when it reaches
``failpoint(<name>)`` for the n-th time (the first by default).

This is how a test stops a real write at an exact step; nothing is cleaned up, as after ``kill -9``. The names are
the steps of a commit, in order: ``after_topic_rows``, ``after_run_log``, ``before_publish``, ``after_publish``.

In-process tests use ``inject(name, error)`` instead: the failpoint raises ``error`` (a fault whose outcome the
caller cannot know, such as a lost connection) the next time it is reached.
"""
from __future__ import annotations

import os
import signal

ENVIRONMENT = "SEQDEDUP_CRASH_AT"
NAMES = ("after_topic_rows", "after_run_log", "before_publish", "after_publish", "after_output_rows")


_reached: dict[str, int] = {}
_injected: dict[str, list[BaseException]] = {}


def inject(name: str, *errors: BaseException) -> None:
    """Raise each of ``errors`` in turn, one per time ``failpoint(name)`` is reached, in this process."""
    _injected.setdefault(name, []).extend(errors)


def failpoint(name: str) -> None:
    if _injected.get(name):
        raise _injected[name].pop(0)
    target, _, nth = os.environ.get(ENVIRONMENT, "").partition(":")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != int(nth or 1):
        return
    if os.getpgid(0) == os.getpid():   # leads its own group (the test started it so): take the JVM down too
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
