"""The broker: the parts of a session its jobs run on, and the look-ups every job starts from.

A ``Broker`` holds one engine's adapter, the catalog on it (as written, and as committed), the writer
(``seqdedup.core.writer``) and the clock; it finds a name's topic, the registered topics, and a topic's state. As a
Pulsar broker serves its topics to the clients, it serves ``seqdedup.session.Session``, the public face, which owns
one and delegates to it. The jobs of ``seqdedup/core/`` that need many of these parts (topic creation, policy
changes, snapshots, a statement, recovery) take the broker, never the session; the others take only the parts they
use (``compaction.compact`` the adapter).
"""
from __future__ import annotations

import datetime as dt
from typing import Callable

from sqlglot import exp

from seqdedup.catalog.catalog import Catalog, Topic, TopicRef, topic_ref
from seqdedup.catalog.schema import catalog_table
from seqdedup.extensions.base import EngineAdapter

from .topic_state import TopicState, load
from .writer import Writer


class Broker:
    """The adapter, catalog, writer and clock of one session, and its look-ups of topics (see the module's text)."""

    def __init__(self, adapter: EngineAdapter, clock: Callable[[], dt.datetime], lock_timeout: float | None):
        self.adapter = adapter
        self.clock = clock            # the time statements, snapshots and purges see; tests move it
        self.catalog = Catalog(adapter)
        self.committed = Catalog(adapter.committed_reads())   # state reads from any thread, outside statements
        self.writer = Writer(adapter, self.catalog, lock_timeout)
        try:
            with self.writer:
                complete = self.catalog.check_version()
                if not adapter.read_only and not complete:    # (on Spark each CREATE is a catalog round trip)
                    with adapter.transaction():
                        self.catalog.create()
        except BaseException:
            self.writer.close()
            raise

    def ref(self, topic: str | exp.Table, namespace: str | None = None) -> TopicRef:
        return topic_ref(topic, self.adapter.DEFAULT_NAMESPACE, namespace, self.adapter.DATABASE)

    def reads(self) -> Catalog:
        """The catalog as this thread reads it: with its own uncommitted writes while it is the writer, else as
        committed (any thread may read while another writes)."""
        return self.catalog if self.writer.held() else self.committed

    def topic(self, topic: str | TopicRef, *, fresh: bool = False) -> Topic:
        """A registered topic (see ``Session.topic``)."""
        if fresh:
            self.refresh_topics()
        return self.reads().topic(topic if isinstance(topic, TopicRef) else self.ref(topic))

    def topics(self) -> list[str]:
        return [r.key for r in self.reads().topics()]

    def refresh_topics(self) -> None:
        """Forget what this process read of the registry and the policies, where other drivers may have created a
        topic or set a policy since (Spark keeps a table's file listing once read; nothing to do where one process
        writes)."""
        self.adapter.storage.refresh(catalog_table("seqdedup_topics"), catalog_table("seqdedup_policies"))

    def state(self, topic: str | TopicRef) -> TopicState:
        """The topic's state as published (see ``Session.state``)."""
        ref = topic if isinstance(topic, TopicRef) else self.ref(topic)
        writer = self.writer
        if writer.held():
            return writer.state(ref)
        known = writer.current(ref)
        if known is not None:
            return known
        if writer.lock.try_enter():      # nobody writes: recover it for everyone (kept in memory from now on)
            try:
                return writer.state(ref)
            finally:
                writer.lock.__exit__(None, None, None)
        return load(self.committed, self.adapter.committed_reads(), ref)    # a write is in flight: read around it


__all__ = ["Broker"]
