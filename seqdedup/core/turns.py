"""Turns: a statement that keeps losing its topic's commit race to other drivers goes first (issue 46).

Commits are optimistic (docs/engines/spark.md): of the drivers that decided on one state, the first to register the
next commit number wins, and the others decide again. That favours the driver that just won, whose next statement
starts on a state already current: under drivers that all write as fast as they can, one of them may win every
commit, and another statement wait for minutes. The winner never sees the losers, since they publish nothing; a
turn makes them seen.

A statement that lost ``AFTER`` race claims a turn: the epoch ``<claim time in ms>`` of the topic's turn key
(``turn-`` and a digest of its name) in the database's lease store (a partition of ``seqdedup_leases``, as
producers' leases are claimed, seqdedup/core/leases.py). Every statement on the topic first waits while a live claim
older than its own is there (any live claim, if it has none): the losers go first, the oldest first, and the others
after them. Once a driver has lost a race or waited for a turn on the topic, its statements there claim their turn
before their first try for ``CONTENDED`` seconds: under steady contention every statement queues, oldest claim
first, decides on a state no other driver changes before it publishes, and loses no race but to a statement that
was already deciding when it claimed; a driver alone claims nothing, and its statements cost one look. A claim
is removed when its statement ends, published or failed. One its driver could not remove (killed) lapses ``SECONDS``
after this driver first saw it, whatever the clocks say, and is removed by whoever sees it lapsed: a wait is
bounded. A claimant whose claim was removed so (its statement took longer than that) claims again before its next
try.

The cost: one look at the turns (a metastore call) before each statement, where other drivers may write, and under
contention a claim and its removal (two more); nothing where the database has no lease store (DuckDB, a local Spark
session, which no other driver writes).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import time

log = logging.getLogger("seqdedup.commits")

#: Lost races in a row after which a statement claims a turn.
AFTER = 1
#: Seconds after this driver lost a race on a topic, or waited for a turn there, during which its statements on the
#: topic claim their turn before their first try: under steady contention they all queue, oldest claim first, and
#: none decides only to lose (alone, a statement claims nothing).
CONTENDED = 30.0
#: Seconds a claim holds others back, from when a driver first saw it: longer than a statement takes.
SECONDS = 120.0
#: Seconds between looks while waiting.
POLL = 0.2
#: Per turn key, when this process first saw each claim (monotonic): a lapse is judged by this process's clock alone.
_SEEN: dict[str, dict[int, float]] = {}
#: Per turn key, until when (monotonic) this process's statements claim first (``CONTENDED``).
_CONTENDED_UNTIL: dict[str, float] = {}


class Turns:
    """The turns of one topic, in one driver's lease store."""

    def __init__(self, store, topic: str):
        # (a digest: a topic's name may hold any character, and a key names a partition and a directory)
        self.store, self.topic = store, topic
        self.key = "turn-" + hashlib.sha256(topic.encode()).hexdigest()[:32]

    @classmethod
    def of(cls, adapter, topic: str) -> "Turns | None":
        """The turns of ``topic`` (its key) in ``adapter``'s lease store, where other drivers may write it."""
        store = adapter.lease_store if adapter.contended else None
        return None if store is None else cls(store, topic)

    def wait(self, mine: int | None) -> int | None:
        """Return once no live claim older than ``mine`` (any live claim, for None) is left; the claim this
        statement holds now (``mine`` claimed again where another driver took it for lapsed and removed it)."""
        waited = time.monotonic()
        while True:
            live = self._live(mine)
            if mine is not None and mine not in live:
                mine = self.claim()
            ahead = [claim for claim in live if mine is None or claim < mine]
            if ahead:
                self.saw_contention()
            else:
                if time.monotonic() - waited > POLL:
                    log.info("[%s] waited %.1f s for the turns of statements that lost commit races", self.topic,
                             time.monotonic() - waited)
                return mine
            time.sleep(POLL)

    def contended(self) -> bool:
        """Whether this driver lost a race or waited for a turn on the topic in the last ``CONTENDED`` seconds."""
        return time.monotonic() < _CONTENDED_UNTIL.get(self.key, 0.0)

    def saw_contention(self) -> None:
        _CONTENDED_UNTIL[self.key] = time.monotonic() + CONTENDED

    def claim(self, why: str = f"after {AFTER} lost commit race") -> int | None:
        """Claim a turn; its epoch, or None where none could be registered."""
        epoch = int(time.time() * 1000)
        for _ in range(3):        # (another driver claimed in the same millisecond)
            if self.store.register(self.key, epoch, epoch / 1000):
                log.info("[%s] claimed a turn %s", self.topic, why)
                return epoch
            epoch += 1
        return None

    def release(self, epoch: int) -> None:
        """Remove a claim (its statement ended); one that cannot be removed lapses by itself."""
        with contextlib.suppress(Exception):
            self.store.unregister(self.key, epoch)

    def _live(self, mine: int | None) -> list[int]:
        now = time.monotonic()
        claims = self.store.epochs(self.key)
        seen = _SEEN[self.key] = {claim: _SEEN.get(self.key, {}).get(claim, now) for claim in claims}
        lapsed = [claim for claim in claims if claim != mine and now - seen[claim] >= SECONDS]
        for claim in lapsed:       # (its driver died holding it: whoever sees it lapsed removes it)
            self.release(claim)
        return [claim for claim in claims if claim not in lapsed]
