"""Crash points for the kill tests: ``SEQDEDUP_CRASH_AT=<name>[:<n>]`` makes the process kill itself, and its
process group (the Spark driver JVM is a child of the Python process), with SIGKILL when it reaches
``failpoint(<name>)`` for the n-th time (the first by default).

This is how a test stops a real write at an exact step; nothing is cleaned up, as after ``kill -9``. The names are
the steps of a commit, in order: ``after_topic_rows``, ``after_run_log``, ``before_publish``, ``after_publish``.
"""
from __future__ import annotations

import os
import signal

ENVIRONMENT = "SEQDEDUP_CRASH_AT"
NAMES = ("after_topic_rows", "after_run_log", "before_publish", "after_publish")


_reached: dict[str, int] = {}


def failpoint(name: str) -> None:
    target, _, nth = os.environ.get(ENVIRONMENT, "").partition(":")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != int(nth or 1):
        return
    if os.getpgid(0) == os.getpid():   # leads its own group (the test started it so): take the JVM down too
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
