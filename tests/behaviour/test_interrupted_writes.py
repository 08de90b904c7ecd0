"""Writes cut short between their steps, on every engine: whatever survives, the state a reader sees and the state
the next write uses agree with the policy that applies (R10), and nothing is lost or written twice.

On DuckDB a failed write rolls back whole. On Spark a policy change is two writes (the policy row, then the snapshot
that makes the state follow it), so a process that dies between them leaves the new policy without its snapshot:
readers must already see the state that snapshot will make (found by the crash fuzzer, tests/crash/fuzz.py).
"""
from __future__ import annotations

import pytest

from seqdedup import DupStatus, failpoints


@pytest.fixture(autouse=True)
def no_leftover_faults():
    yield
    failpoints._injected.clear()


@pytest.mark.parametrize("enable_after", [False, True], ids=["disable", "enable-again"])
def test_a_policy_change_cut_short_is_whole_or_not_at_all(dedup, enable_after):
    dedup.topic()
    dedup.send([("p", 1), ("p", 2)])
    if enable_after:
        dedup.session.alter_topic("events", deduplication_enabled=False)
        dedup.send([("q", 7)])
    failpoints.inject("after_policy_rows", ConnectionError("died between the policy and its snapshot"))
    with pytest.raises(ConnectionError):
        dedup.session.alter_topic("events", deduplication_enabled=enable_after)
    dedup.restart()
    enabled = dedup.session.topic("events").applied.deduplication_enabled
    changed = enabled == enable_after
    # either the change took effect (and the state is what it makes: empty) or it did not (the state is intact)
    marks = {p: s for p, s, _ in dedup.session.producer_state("events").rows}
    assert marks == ({} if changed or not enabled else {"p": 2})
    assert dedup.session.dup_status("events", "p", 2) == (DupStatus.DUP if enabled and not changed
                                                          else DupStatus.NOT_DUP)
    # and the next write agrees with what readers saw
    result = dedup.send([("p", 2), ("p", 3)])
    assert result.written == (1 if enabled and not changed else 2)
    assert dedup.last("p") == (3 if enabled else -1)
