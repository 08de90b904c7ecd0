"""A topic's state in memory, as Pulsar's broker keeps it: the persisted marks (``highestSequencedPersisted``) and
what the next commit needs, valid as of one commit.

The catalog is the durable truth (R7: the last complete snapshot plus a replay of the log after it); this is a
cache of it. It is recovered when a topic is first used in a process (``load``), then moved forward by each commit
this process makes (``after``), and checked before it is trusted where another process could have written
(``Writer.state``). A ``TopicState`` never changes: a commit makes a new one, so a reader on another thread always
sees one whole state.

The marks are Arrow tables ``(producer, sequence_id, last_publish_time)`` (seqdedup/core/marks.py): an engine reads
them as a relation without a row of Python per producer, and a commit folds its changes in at the cost of the
producers it wrote, not of every producer known.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.catalog import Catalog, Topic, TopicRef
from seqdedup.catalog.schema import foreign_commits
from seqdedup.catalog.state import STARTS, SnapshotHeader, catch_up_query, literal, producer_state_query
from seqdedup.errors import EngineError
from seqdedup.catalog.ids import arrow_type
from seqdedup.core.marks import MARKS, Marks, fold, in_key_window, keyed, marks_schema, marks_table, unmarked


_log = logging.getLogger("seqdedup.state")


@dataclass(frozen=True)
class TopicState:
    """What seqdedup knows of one topic between its commits."""

    topic: Topic                    # its columns and applied policies, as of ``commit``
    commit: int                     # the last commit number taken (published, or failed): the next is commit + 1
    published: frozenset[int] | None   # the published commits where the engine tracks them (Spark), else None
    end: int                        # every entry written so far has a position at or below it (0: none)
    header: SnapshotHeader          # the last complete snapshot
    since_snapshot: int             # entries written after that snapshot (R8)
    marks: Marks                    # the persisted marks, none while deduplication is disabled (R10)
    # what changed since the last snapshot, which the next increment holds (kept apart, so that an increment
    # costs what changed, not a pass over every producer): the new marks of the producers that wrote (MARKS), and
    # the producers that left the state (purged, R11: a tombstone each)
    recent: pa.Table = field(default_factory=lambda: MARKS.empty_table())
    gone: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))
    # commit numbers of partitions another tool registered (Spark; seqdedup/core/foreign.py), as of the recovery: no
    # commit takes one (its publish would collide), and none counts as published
    taken: frozenset[int] = frozenset()
    # the time of the latest commit that wrote an entry (a producer's last write, also one purged since); with the
    # last snapshot's, what the catalog says of the topic's latest publish time (``published_at``)
    written_at: dt.datetime | None = None
    # the window in entries (R20) the marks were last cut to: they hold no more keys than that (None: not known). A
    # statement of producers adds no key, so the next one need not look at every mark again (``in_key_window``)
    key_window: int | None = None

    @property
    def ids(self) -> pa.DataType:
        """The Arrow type of the topic's ids (R19: text for composite ids)."""
        return arrow_type(self.topic.id_parts)

    @property
    def enabled(self) -> bool:
        """Deduplication is on for the state the statements see (the snapshot says so, and the policy agrees)."""
        return self.header.enabled and self.topic.applied.deduplication_enabled

    def mark(self, producer: str) -> int | None:
        """The producer's persisted mark (R13), or None."""
        found = self.marks.lookup(pa.array([producer], pa.string()))
        return None if not found.num_rows else found.column("sequence_id")[0].as_py()

    @property
    def published_at(self) -> dt.datetime | None:
        """The topic's latest publish time as its catalog says (the last write, the last snapshot): a commit is
        stamped no earlier (publish times never go backwards), and R11 judges idleness by it. Recovered state and
        state kept in memory say the same."""
        return max(filter(None, (self.written_at, self.header.taken_at)), default=None)

    def stamp(self, reading: dt.datetime) -> dt.datetime:
        """The publish time of the next commit, for a clock that reads ``reading``: never before the topic's
        latest (a clock stepped back, or another process's behind this one's, does not stamp an entry earlier than
        one already written)."""
        return reading if self.published_at is None else max(reading, self.published_at)

    def oldest_write(self) -> dt.datetime | None:
        """The earliest ``last_publish_time`` of any producer: nobody expires before the timeout from it (R11)."""
        return self.marks.oldest()

    def after(self, *, commit: int, end: int | None = None, delta: pa.Table | None = None,
              marks: pa.Table | None = None, header: SnapshotHeader | None = None, since_snapshot: int | None = None,
              topic: Topic | None = None, unmarked: bool = False) -> "TopicState":
        """The state once ``commit`` is published: the log's new ``end``; ``marks`` as the whole new marks (a
        purge, a reset) and/or ``delta`` folded in (the new highest id and write time of each producer that wrote);
        a new last snapshot, count of entries after it, or topic (policies) when the commit changed them. A new
        last snapshot recorded every change before it: ``changed`` starts again. ``unmarked``: no producer of
        ``delta`` has a mark (a statement's keys, R20), so they are added without a look-up."""
        new = self.marks if marks is None else Marks.of(marks, self.ids)
        recent, gone = (new.empty(), []) if header is not None else (self.recent, [self.gone])
        if marks is not None and header is None:        # producers dropped without a snapshot: tombstones next time
            before = self.marks.table.column("producer")
            dropped = pc.filter(before, pc.invert(pc.is_in(before, marks.column("producer"))))
            gone.append(dropped)
            recent = recent.filter(pc.invert(pc.is_in(recent.column("producer"), dropped)))
        if delta is not None and delta.num_rows:
            delta = marks_table(delta, self.ids)
            if unmarked:    # (no producer of ``delta`` had a mark: a statement's keys, R20)
                new, recent = new.added(delta), pa.concat_tables([recent, delta])
            else:
                new, recent = new.folded(delta), fold(recent, delta)
            gone = [pc.filter(g, pc.invert(pc.is_in(g, delta.column("producer")))) if len(g) else g
                    for g in gone]      # came back
        published = None if self.published is None else self.published | {commit}
        written_at, key_window = self.written_at, self.key_window
        if delta is not None and delta.num_rows:
            if key_window is not None and (unmarked or pc.any(keyed(delta)).as_py()):      # (keys came)
                key_window = None
            latest = pc.max(delta.column("last_publish_time")).as_py()
            written_at = latest if written_at is None else max(written_at, latest)
        return replace(self, topic=topic or self.topic, commit=_past(max(self.commit, commit), self.taken),
                       written_at=written_at,
                       end=self.end if end is None else max(self.end, end), header=header or self.header,
                       since_snapshot=self.since_snapshot if since_snapshot is None else since_snapshot,
                       marks=new, published=published, recent=recent, gone=_union(gone), key_window=key_window)

    def in_key_window(self) -> "TopicState":
        """R20, a window in entries (``key_window_entries``): the state less the keys it lets go, those outside the
        topic's last N keyed entries (``marks.in_key_window``: the N highest key marks stay). Neither a snapshot nor
        a tombstone records a prune (R11's purge is recorded): a recovery replays the same marks and prunes them
        again (``load``, ``catch_up``); a snapshot holds what the state held when it was taken."""
        window = self.topic.applied.key_window_entries
        if not self.enabled or window is None or (self.key_window is not None and self.key_window <= window):
            return self
        if self.marks.num_rows <= window:
            return replace(self, key_window=window)
        kept = in_key_window(self.marks.table, window)
        if kept is self.marks.table:
            return replace(self, key_window=window)
        return replace(self, marks=Marks.of(kept, self.ids), key_window=window)

    @property
    def changed(self) -> int:
        """How many producers the next increment holds."""
        return self.recent.num_rows + len(self.gone)

    def increment(self) -> pa.Table:
        """The rows of an increment of the last snapshot: the mark of each producer that changed since, and a
        tombstone (NULL sequence_id) for each one that left the state."""
        return pa.concat_tables([self.recent.cast(marks_schema(self.ids)), unmarked(self.gone, self.ids)])


def _past(commit: int, taken: frozenset[int]) -> int:
    """``commit``, moved past the numbers after it that ``taken`` holds, so that the next commit's is free.

    Example:
        >>> _past(2, frozenset({3, 4, 999})), _past(5, frozenset({3, 4, 999}))
        (4, 5)
    """
    while commit + 1 in taken:
        commit += 1
    return commit


def _spans(numbers: list[int]) -> str:
    """Commit numbers, as runs.

    Example:
        >>> _spans([12, 13, 14, 18])
        '12-14, 18'
    """
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and runs[-1][-1] + 1 == number:
            runs[-1][1:] = [number]
        else:
            runs.append([number])
    return ", ".join("-".join(map(str, run)) for run in runs)


def _union(arrays: list) -> pa.Array:
    """The distinct producer names of ``arrays``."""
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays if len(a)]
    if not arrays:
        return pa.array([], pa.string())
    return pc.unique(pa.concat_arrays([a.cast(pa.string()) for a in arrays]))


def load(catalog: Catalog, adapter, ref: TopicRef) -> TopicState:
    """Recover a topic's state from the catalog (R7): its last complete snapshot, then a replay of the entries
    written after it, which also gives the log's end and how many entries the next snapshot is due after.

    The published commits are listed first, and the reads after count only their rows (where the engine tracks
    commits): where other processes publish (``contended``), a commit published meanwhile is left for a catch-up,
    and the state is exactly as of its number. There the topic is looked up once, after the
    listing (``_load``), where a lookup costs a job; an unknown topic, or one whose table is gone, fails the listing
    and is named then."""
    started = time.monotonic()
    if adapter.contended:
        with adapter.storage.listed_once(ref):
            try:
                state = _load(catalog, adapter, ref, None)
            except EngineError:
                catalog.topic(ref)      # (a TopicError that names it, rather than the engine's error)
                raise
    else:
        topic = catalog.topic(ref)                  # an unknown topic, or one whose table is gone, is named first
        with adapter.storage.listed_once(ref):             # one listing of a topic's partitions serves every read below
            state = _load(catalog, adapter, ref, topic)
    header = state.header
    # the commits after the snapshot: the published ones where the engine tracks them, else every number after it
    commits = state.commit - header.commit_id if state.published is None else sum(
        1 for number in state.published if number > header.commit_id)
    _log.info("[%s] recovered from snapshot %s: replayed %s entries of %s commits after it (%s producers, log end "
              "%s) in %.2f s", ref.key, header.snapshot_id, f"{state.since_snapshot:,}", f"{commits:,}",
              f"{state.marks.num_rows:,}", f"{state.end:,}", time.monotonic() - started)
    return state.in_key_window()


#: The snapshot kinds a catch-up adopts: routine ones, which record the marks as the commits left them (a purge, a
#: repair or a policy's snapshot changes them: the state is recovered whole).
ROUTINE = ("snapshot", "increment")


def catch_up(catalog: Catalog, adapter, ref: TopicRef, state: TopicState,
             published: frozenset[int]) -> TopicState | None:
    """``state`` moved forward over the commits other drivers published since it (``published`` as just listed):
    their entries folded into the marks, as their own commits fold them, and the routine snapshots they took adopted
    as the state's (from the same query, which says which header rows won their commits; the snapshot headers are
    read whole only where a winner is not recorded yet): the next snapshot extends their chain. None where
    something else changed, and the state must be recovered whole (``load``): a commit of theirs wrote another kind
    of snapshot (a purge, a policy's), a compaction merged one, a commit the state counted is gone, or another tool
    registered a partition. A driver that lost a commit's compare-and-set pays for the commits it missed, not for a
    whole recovery (issue 46).

    A commit of theirs with no entry changed no mark: a statement that dropped every entry it sent (another driver's
    retry of a batch already written), or a policy change. Where there is one, the topic's policies are read again
    (a change that turns deduplication on or off also writes a snapshot, which is no routine one)."""
    started = time.monotonic()
    new = sorted(published - state.published)

    def whole(why: str) -> None:
        _log.info("[%s] recovering whole rather than catching up over commits %s: %s", ref.key, _spans(new), why)

    if not new or not state.published <= published or new[0] <= max(state.published, default=0):
        return whole("a commit it counted is gone, or one before its last appeared") if new else None
    if not state.enabled:
        return whole("deduplication is off")
    if foreign_commits(adapter.storage.foreign_partitions(ref)) != state.taken:
        return whole("another tool registered a partition")
    if any(first < last and last >= new[0] for first, last in adapter.storage.partition_ranges(ref)):
        return whole("a compaction merged them")
    found = adapter.fetch_arrow(catch_up_query(ref.key, ref.table, new, state.end, adapter.storage.own_rows(ref)))
    kinds = found.column("kind")
    entries = found.filter(pc.equal(kinds, "entries"))
    snapshots = found.filter(pc.equal(kinds, "snapshot"))
    empty = set(new) - set(entries.column("commit_id").to_pylist())
    header, adopted = state.header, None
    heads = snapshots.to_pylist()
    if heads and not all(head["logged"] for head in heads):
        # a commit's winner not recorded yet: the snapshot headers whole (they read its partition's directory)
        last = catalog.last_snapshot(ref)
        if last.snapshot_id != header.snapshot_id:
            if last.commit_id not in new or last.kind not in ROUTINE or last.purged:
                return whole(f"the last snapshot, {last.snapshot_id}, is not a routine one of theirs")
            header = adopted = last
    else:
        for head in sorted((head for head in heads if head["won"]), key=lambda head: head["commit_id"]):
            full = head["parent_id"] is None
            if head["snapshot_kind"] not in ROUTINE or not full and head["parent_id"] != header.snapshot_id:
                return whole(f"commit {head['commit_id']} wrote a snapshot that is not routine (a purge, a repair, "
                             "a policy's)")
            taken_at = head["last_publish_time"]        # (naive, in local time, as a recovery reads it)
            taken_at = taken_at.astimezone().replace(tzinfo=None) if taken_at.tzinfo else taken_at
            header = adopted = header.extended(head["snapshot_id"], head["position"], head["snapshot_kind"], taken_at,
                                               head["commit_id"], rows=0 if full else head["entries"], full=full)
    if adopted is None:
        caught = _folded(state, entries, new[-1])
    else:                       # their entries up to the snapshot they took, the snapshot, then their entries after it
        before = pc.less_equal(entries.column("commit_id"), adopted.commit_id)
        caught = _folded(state, entries.filter(before), new[-1]).after(commit=new[-1], header=adopted,
                                                                       since_snapshot=0)
        caught = _folded(caught, entries.filter(pc.invert(before)), new[-1])
    # (a topic looked up after the listing: its policies as of it, as a recovery reads them)
    caught = replace(caught, published=published, topic=catalog.topic(ref) if empty else state.topic)
    _log.info("[%s] caught up over %s commits of other drivers (%s entries, %s producers%s%s) in %.2f s", ref.key,
              f"{len(new):,}", f"{pc.sum(entries.column('entries')).as_py() or 0:,}",
              f"{pc.count_distinct(entries.column('producer')).as_py():,}",
              f", {len(empty)} with no entry" if empty else "",
              "" if adopted is None else f", their snapshot {adopted.snapshot_id} adopted", time.monotonic() - started)
    return caught.in_key_window()


def _folded(state: TopicState, entries: pa.Table, commit: int) -> TopicState:
    """``state`` once ``entries`` (a catch-up's rows: per commit and producer, the highest id, last write, count and
    last position) are folded in, as of ``commit``."""
    if not entries.num_rows:
        return state.after(commit=commit)
    highest = entries.group_by("producer").aggregate([("sequence_id", "max"), ("last_publish_time", "max")])
    delta = marks_table(pa.table({"producer": highest.column("producer"),
                                  "sequence_id": highest.column("sequence_id_max"),
                                  "last_publish_time": highest.column("last_publish_time_max")}))
    return state.after(commit=commit, end=pc.max(entries.column("position")).as_py(), delta=delta,
                       since_snapshot=state.since_snapshot + pc.sum(entries.column("entries")).as_py())


def created(topic: Topic, *, commit: int, snapshot_id: int, kind: str, taken_at: dt.datetime,
            tracks_commits: bool) -> TopicState:
    """The state of a topic this process just created in a new table: what ``load`` would recover from its first
    commit (one empty full snapshot at position 0, no entry), known without reading it back.

    Example:
        >>> from seqdedup.catalog.catalog import Topic, TopicRef
        >>> topic = Topic(ref=TopicRef("main", "events", "main"), user_columns=[("payload", "VARCHAR")], settings={})
        >>> state = created(topic, commit=1, snapshot_id=1, kind="enabled", taken_at=dt.datetime(2026, 1, 1),
        ...                 tracks_commits=True)
        >>> state.enabled, state.commit, state.published, state.header.chain, state.header.start_id, state.end
        (True, 1, frozenset({1}), (1,), 1, 0)
    """
    header = SnapshotHeader(snapshot_id, 0, kind, taken_at, commit, snapshot_id + 1, (snapshot_id,),
                            start_id=snapshot_id if kind in STARTS else None)
    return TopicState(topic=topic, commit=commit, published=frozenset({commit}) if tracks_commits else None, end=0,
                      header=header, since_snapshot=0, marks=Marks.of(ids=arrow_type(topic.id_parts)),
                      recent=marks_table(ids=arrow_type(topic.id_parts)))


def _load(catalog: Catalog, adapter, ref: TopicRef, topic) -> TopicState:
    if not adapter.read_only:
        adapter.storage.drop_merged(ref)     # what a compaction cut short left for plain reads to count twice (compaction.py)
    published = adapter.storage.published_commits(ref)
    # Where other processes publish, the topic is looked up after the listing (its policies as of it): alongside
    # the read of its snapshots, where the engine runs queries at once (``alongside``: on Spark Connect each is a
    # job, mostly waited for), and so is the log's end alongside the replay below.
    looked_up = adapter.alongside(lambda: catalog.topic(ref)) if adapter.contended else None
    try:
        # (beside the read of the commits' winners, which the snapshots' visibility depends on, where it is needed)
        header = adapter.storage.beside_winners(ref, lambda: catalog.last_snapshot(ref))
    finally:
        if looked_up is not None:       # (its error first, as when it ran first: an unknown topic is named)
            topic = looked_up.result()
    taken = foreign_commits(adapter.storage.foreign_partitions(ref))
    own = adapter.storage.own_rows(ref)      # what another tool wrote counts for nothing (seqdedup/core/foreign.py)
    if adapter.TRACKS_COMMITS:
        # the state as of the commits listed, not also of one another driver published since (the reads below would
        # find its rows): its next commit would lose the race, and the catch-up over that commit, finding its
        # entries counted already, could not tell it from a policy's commit and would recover whole again
        own = exp.and_(own, exp.column("_commit") <= literal(max(published, default=0)))
    position = exp.column("_position")
    after = (exp.select(exp.alias_(exp.func("coalesce", exp.Max(this=position), literal(header.position)), "log_end"),
                        exp.alias_(exp.Count(this=exp.Star()), "entries_after"))
             .from_(ref.table.copy())
             .where(exp.and_(exp.column("_commit") >= literal(header.commit_id),
                             position.copy() > literal(header.position), own)))
    counted = adapter.alongside(lambda: adapter.fetchall(after)[0]) if adapter.contended else None
    if header.enabled != topic.applied.deduplication_enabled:
        # A policy change recorded, but the process died before the snapshot that makes the state follow it (on
        # Spark they are two writes). The next write takes that snapshot; until then, the state is what it will
        # make it: empty, whether deduplication was just disabled or just enabled again (R10).
        marks, recent = Marks.of(ids=arrow_type(topic.id_parts)), marks_table(ids=arrow_type(topic.id_parts))
    else:
        recovered = adapter.fetch_bulk(producer_state_query(
            ref.key, ref.table, header, adapter.storage.visible_commits(ref, include_open=False), own, topic.id_parts))
        marks = Marks.of(recovered, arrow_type(topic.id_parts))
        recent = marks.table.filter(pc.fill_null(recovered.column("replayed"), False))    # replayed: changed since
    if counted is not None:     # the next commit follows the last published one
        end, since = counted.result()
        commit = max(published, default=0)
    else:                       # and the highest number a catalog row carries: read in the same query (on Spark
        # each query costs a job's start, a tenth of a second and more)
        end, since, written = adapter.fetchall(exp.select("*").from_(after.subquery("a")).join(
            catalog.highest_written_commit(ref).subquery("w"), join_type="cross"))[0]
        commit = catalog.next_commit(ref, written) - 1
    commit = _past(commit, taken)
    return TopicState(topic=topic, commit=commit, published=frozenset(published) if adapter.TRACKS_COMMITS else None,
                      end=end, header=header, since_snapshot=since, marks=marks, recent=recent, taken=taken,
                      written_at=pc.max(marks.table.column("last_publish_time")).as_py() if marks.num_rows else None)


__all__ = ["TopicState", "MARKS", "marks_table", "unmarked", "load", "catch_up", "created"]
