"""Turns between drivers (``seqdedup.writer.Turns``): a driver that published after it saw another driver's commits
waits, before its next statement on that topic, a random while up to what its last statement took; one that saw
nobody else, or that writes another topic, never waits. The clock is this test's (the rule, not the timing: the
drivers themselves run in test_drivers.py's C17 test, and benchmarks/drivers_contention.py measures the effect)."""
from __future__ import annotations

import pytest

from seqdedup import writer


@pytest.fixture
def clock(monkeypatch):
    now = {"t": 100.0, "slept": []}
    monkeypatch.setattr(writer.time, "monotonic", lambda: now["t"])
    monkeypatch.setattr(writer.time, "sleep", lambda s: now["slept"].append(s))
    monkeypatch.setattr(writer.random, "uniform", lambda low, high: high)      # the longest wait the rule allows
    return now


def test_a_winner_that_saw_other_drivers_lets_them_have_a_turn_and_nobody_else_waits(clock):
    turns = writer.Turns()
    turns.published("t", started=98.0, lost=False)       # alone so far: no wait
    turns.wait("t")
    assert clock["slept"] == []

    turns.saw_others("t")                                 # another driver's commit, caught up over at 100 s
    clock["t"] = 103.0
    turns.published("t", started=100.0, lost=False)       # a statement of 3 s that saw it
    turns.wait("u")                                       # another topic: no turn due there
    turns.wait("t")
    assert clock["slept"] == [3.0]
    turns.wait("t")                                       # a turn is let once
    assert clock["slept"] == [3.0]

    clock["t"] = 110.0
    turns.published("t", started=108.0, lost=False)       # what it saw was before this statement: no wait
    turns.wait("t")
    assert clock["slept"] == [3.0]
    turns.published("t", started=109.0, lost=True)        # it lost a race on the way: wait
    clock["t"] = 110.5
    turns.wait("t")
    assert clock["slept"] == [3.0, 0.5]                   # what is left of the 1 s it took
