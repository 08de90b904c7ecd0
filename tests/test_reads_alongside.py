"""Reads alongside their caller's (``EngineAdapter.alongside``, extensions/binding.py): where the engine runs queries
at once, a read started from a reader (the reads of a recovery that itself runs alongside, as ``ingest``'s does) runs
beside the others it starts, never queued behind the readers that wait for it; one level further down, at once."""
from __future__ import annotations

import threading

from seqdedup.extensions import binding


class _Server:
    """An adapter whose engine runs queries at once (Spark Connect), as far as ``alongside`` asks."""

    READS_ALONGSIDE = True
    parameters = binding.bind
    alongside = binding.alongside


def test_the_reads_a_reader_starts_run_beside_each_other():
    server = _Server()
    both = threading.Barrier(2, timeout=10)     # met only where the two run at once

    def recovery():
        reads = [server.alongside(lambda: both.wait() is not None) for _ in range(2)]
        return [read.result(timeout=20) for read in reads]

    assert server.alongside(recovery).result(timeout=30) == [True, True]


def test_every_reader_may_wait_for_reads_of_its_own():
    server = _Server()

    def deepest():
        return threading.current_thread().name

    def nested():
        return server.alongside(deepest).result(timeout=10)       # a third level: at once, on the thread asking

    def recovery():
        return server.alongside(nested).result(timeout=20)

    recoveries = [server.alongside(recovery) for _ in range(8)]   # more than the readers: some wait their turn
    assert all(done.result(timeout=60).startswith("seqdedup-nested") for done in recoveries)
