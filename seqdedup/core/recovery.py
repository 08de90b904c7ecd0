"""Recovery (R7), checked: rebuild a topic's state from its last complete snapshot plus a replay, and hold it against
a replay of the whole log since the state last started over, before anything is written.

The state the session uses is the chain of snapshots (the latest complete full one and its increments, see
``catalog.state.SnapshotHeader``) plus a replay of the entries after it. A snapshot row can be wrong (written by
hand, copied in from elsewhere, restored from the wrong backup, a bug): a mark lower than the log supports lets a
retry be written twice, a higher one drops new ids up to it. So ``recover`` recomputes the marks the slow, obviously
right way too: from the last full snapshot where the state started over (``catalog.state.STARTS``:
``enabled``, empty; ``purge``, after dropping idle producers; the whole log where none is kept) plus every entry
after it, less the producers a later increment purged (a tombstone at position P drops what the producer wrote up
to P), and compares. (Retention keeps that snapshot: ``Catalog.prune_snapshots``.) It also checks what no
deduplicated topic can hold: two rows at one position, or two rows with one ``(producer, sequence_id)`` since the
state started over.

The snapshot it starts from is checked against the log too, never trusted (``_Reader.start``), as far as the log
still holds the rows and the catalog the history that explain it:

- a mark it holds must be one its producer wrote at or below its position, and no entry of that producer after the
  last one with that id may hold a higher id (ids only grow between two starts: a lower mark is a retry let through,
  a higher one an id never written). A producer purged (R11) and back, or forgotten by a disable (R10), wrote its
  ids again after the higher ones, so this holds for a true snapshot whatever happened before it; compaction keeps
  every entry's position, so it holds across compactions;
- a producer it lacks that wrote before it: an ``enabled`` snapshot lacks every one (R10), but only where the topic's
  policies ever disabled deduplication; a ``purge`` lacks those idle past the timeout when it was taken (R11), so not
  one that wrote after a producer it keeps, nor (where deduplication was never disabled and no cap, R12, ever left
  producers out) one that wrote within the shortest timeout the topic ever had. A disabled snapshot (R10) where the
  policies never disabled deduplication is no state at all.

What the log says replaces what the snapshot says for those producers (the highest id each wrote up to its
position: never lower than the truth), or the whole log where the snapshot cannot be a start, and the state is held
against the replay from there. (Once ``repair`` has written the replayed marks, the state agrees with that replay,
and each later check says again what the snapshot holds wrong, until the state starts over again.)

- Everything agrees: a fresh snapshot is taken at the log's end, so the next start replays nothing.
- The marks differ: nothing is written, and the producers that differ are named, unless ``repair`` is asked for:
  then a snapshot of the replayed marks (kind ``repair``) replaces the wrong state.
- No complete snapshot at all (``producer_sequences`` emptied around seqdedup): statements refuse the topic; without
  ``repair`` nothing is written and the report says so, with ``repair`` the state is rebuilt from a replay of the whole
  log (never lower than the truth: ids that a purge or a disable would have let in again are duplicates again).
- Duplicate rows: reported; seqdedup never deletes topic rows, so they are removed by hand.
- Rows seqdedup did not write (inserted around it, seqdedup/core/foreign.py): left out of everything above, and counted
  with how to move them aside; they leave the state sound, so they do not make the report fail.

The snapshots are read first, then the log's last committed position, and everything is read as of that position (a
commit's entries all come after the entries of the commits before it), so a writer running meanwhile never makes a
false difference; the chain is the one a session starts from, wherever its position.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import asdict, dataclass, field

import pyarrow as pa
from sqlglot import exp

from seqdedup.catalog.catalog import Catalog
from seqdedup.catalog.ids import arrow_type, decoded, id_type
from seqdedup.catalog.state import (SnapshotHeader, chain_of, complete_snapshots, literal, snapshot_headers_query,
                                    snapshot_marks)
from seqdedup.sql.key_window import KEY_PREFIX

from . import snapshots
from .broker import Broker
from .foreign import find as find_foreign
from .marks import in_key_window

#: How many duplicates a report lists (it counts them all).
EXAMPLES = 10
#: The corrected marks of the start's producers the log contradicts, as a relation of the recovery's queries.
CORRECTED = "__sd_recover_start"
#: Each check's findings, one INFO line, topic first.
_log = logging.getLogger("seqdedup.recovery")


@dataclass(frozen=True)
class Header:
    snapshot_id: int | None    # None: no snapshot, the log from its beginning
    position: int      # the snapshot covers the entries at or below it
    kind: str | None   # enabled | disabled | snapshot | purge | repair | increment


#: The start of a replay of the whole log: no snapshot, no entry before it.
WHOLE_LOG = Header(None, 0, None)


@dataclass
class Report:
    """What recovery found, and what it wrote."""

    topic: str
    last_position: int                   # everything was read as of this position of the log
    snapshot_id: int | None              # the latest complete snapshot, which the state starts from (None: none)
    snapshot_position: int | None
    replayed: int                        # entries after it, replayed into the state
    producers: int                       # producers in the state
    checked_from: dict | None            # the snapshot the full replay starts from; None: nothing to check (disabled)
    differences: list[dict] = field(default_factory=list)      # producer, state (its mark), log (the replayed mark)
    left_out_by_cap: list[str] = field(default_factory=list)   # producers max_producers_in_snapshot left out (R12)
    duplicate_positions: list[dict] = field(default_factory=list)    # position, rows (at most EXAMPLES of them)
    duplicate_ids: list[dict] = field(default_factory=list)          # producer, sequence_id, rows
    duplicates_found: int = 0            # how many positions and ids have more than one row, in all
    repaired_snapshot_id: int | None = None    # the snapshot of the replayed marks ``repair`` wrote
    new_snapshot_id: int | None = None         # the fresh snapshot taken when everything agreed
    foreign_rows: int = 0                      # rows seqdedup did not write, left out of everything above
    foreign_partitions: list[str] = field(default_factory=list)    # Spark: partitions seqdedup did not publish
    foreign: str | None = None                 # what they are and how to move them aside (seqdedup/core/foreign.py)
    # the snapshot the check starts from, held against the log: the producers whose marks there the log contradicts
    # (producer, snapshot: its mark there, log: the highest id it wrote up to there), at most EXAMPLES of them, and
    # how many in all; or why the snapshot cannot be where the state started over (then the whole log is replayed)
    start_differences: list[dict] = field(default_factory=list)
    start_differences_found: int = 0
    start_refused: str | None = None
    missing_state: bool = False                # no complete snapshot: the state cannot be recovered

    @property
    def matches_full_replay(self) -> bool | None:
        return None if self.checked_from is None else not self.differences and not self.missing_state

    @property
    def ok(self) -> bool:
        """Nothing wrong is left: the marks agree (or were repaired), the state is there (or was rebuilt), and no
        entry is in the topic twice."""
        wrong = self.differences or self.missing_state
        return (not wrong or self.repaired_snapshot_id is not None) and not self.duplicates_found

    def to_dict(self) -> dict:
        return {**asdict(self), "matches_full_replay": self.matches_full_replay, "ok": self.ok}

    def problems(self) -> str:
        """The problems found, in a sentence each."""
        lines = []
        if self.missing_state:
            lines.append(f"topic {self.topic} has no complete snapshot in producer_sequences (its rows were deleted "
                         "around seqdedup, or the table restored from a backup older than the topic), so its state "
                         "cannot be recovered and statements refuse it")
        if self.start_refused:
            lines.append(self.start_refused)
        if self.start_differences_found:
            start = self.checked_from or {}
            shown = ", ".join(f"{d['producer']} (snapshot {spelled_mark(d['snapshot'])}, log "
                              f"{spelled_mark(d['log'])})" for d in self.start_differences)
            more = self.start_differences_found - len(self.start_differences)
            lines.append(f"snapshot {start.get('snapshot_id')}, where the state last started over, holds marks the log "
                         f"does not give for {self.start_differences_found} producer(s): {shown}"
                         f"{f' and {more} more' if more > 0 else ''} (the check replays the log's marks for them)")
        if self.differences:
            shown = ", ".join(f"{d['producer']} (state {spelled_mark(d['state'])}, log "
                              f"{spelled_mark(d['log'])})" for d in self.differences[:EXAMPLES])
            more = f" and {len(self.differences) - EXAMPLES} more" if len(self.differences) > EXAMPLES else ""
            lines.append(f"the state does not match a replay of the log for {len(self.differences)} producer(s): "
                         f"{shown}{more}")
        if self.duplicates_found:
            shown = [f"position {d['position']} ({d['rows']} rows)" for d in self.duplicate_positions] + [
                f"{d['producer']} id {d['sequence_id']} ({d['rows']} rows)" for d in self.duplicate_ids]
            lines.append(f"the topic holds entries more than once ({self.duplicates_found} positions or producer ids "
                         f"with several rows): {', '.join(shown[:EXAMPLES])}")
        return "; ".join(lines)


def spelled_mark(value: int | None) -> str:
    """A mark as reports write it: ``none`` for no mark."""
    return "none" if value is None else str(value)


def recover(broker: Broker, topic: str, *, repair: bool = False) -> Report:
    """Check a topic's recovered state against its log (see the module's text); with ``repair``, replace a state
    that differs with the replayed one, or rebuild one that is missing. Nothing is written when something is wrong
    and ``repair`` is not asked. ``broker``: a session's (``Session.broker``), or the session itself (as
    ``seqdedup.recovery.recover(session, topic)`` was called before the broker)."""
    broker = getattr(broker, "broker", broker)
    started = time.monotonic()
    ref = broker.ref(topic)
    described = broker.topic(ref)
    applied = described.applied
    read = _Reader(broker.adapter, broker.committed, ref, described.id_parts)
    headers = read.headers()
    last = read.one(exp.select(exp.func("coalesce", exp.Max(this=exp.column("_position")), literal(0)))
                    .from_(ref.table.copy()).where(read.own.copy()))
    current = chain_of(headers)
    if current is None:
        return _said(_without_state(broker, read, applied, last, repair), started)
    disabled = current.kind == "disabled"
    state = {} if disabled else read.marks(read.chain_query(current, last))
    report = Report(topic=ref.key, last_position=last, snapshot_id=current.snapshot_id,
                    snapshot_position=current.position, replayed=read.count(current.position, last),
                    producers=len(state), checked_from=None)
    report.duplicate_positions, positions = read.duplicates(["_position"], read.entries(0, last))
    _foreign(broker.adapter, ref, report)
    base, corrected, names = None, None, []

    def relation(name: str, committed: bool) -> exp.Table:
        names.append(name)
        return broker.adapter.relation(name, corrected, committed=committed)

    try:
        if disabled:
            if applied.deduplication_enabled and not read.history().ever_disabled:
                report.start_refused = (f"snapshot {current.snapshot_id} says deduplication is disabled (R10), but "
                                        "the topic's policies never disabled it: the state is the whole log's")
                base = WHOLE_LOG
        else:
            row = next((row for row in headers if row[0] == current.start_id), None)
            base, corrected = read.start(report, row)
        if base is not None:
            report.checked_from = asdict(base)
            complete = [row[0] for row in headers]
            fixed = relation(CORRECTED, True) if corrected is not None else None
            replayed = read.marks(read.replay_query(base, current, complete, last, fixed))
            window = applied.key_window_entries if read.id_parts is None else None      # (keys: integer ids)
            if window is not None:      # (R20: no snapshot records the keys a window in entries let go)
                state, replayed = in_window(state, window), in_window(replayed, window)
            for producer in sorted(set(state) | set(replayed)):
                if state.get(producer) == replayed.get(producer):
                    continue
                if producer not in state and applied.max_producers_in_snapshot is not None:
                    report.left_out_by_cap.append(producer)
                else:
                    report.differences.append({"producer": producer, "state": state.get(producer),
                                               "log": replayed.get(producer)})
            # (an id written again after its producer was purged is no duplicate: only entries after the last purge)
            live = read.live_entries(base, current, complete, last)
            if window is not None:      # (a key written again once out of the window is no duplicate)
                keys = exp.column("_producer").like(literal(f"{KEY_PREFIX}%"))
                report.duplicate_ids, ids = read.duplicates(["_producer", "_sequence_id"], live.where(exp.not_(keys)))
                within, ids_within = read.keys_within(live.where(keys), window)
                report.duplicate_ids, ids = report.duplicate_ids + within, ids + ids_within
            else:
                report.duplicate_ids, ids = read.duplicates(["_producer", "_sequence_id"], live)
            report.duplicates_found = positions + ids
            if repair and report.differences:
                fixed = relation(f"{CORRECTED}_write", False) if corrected is not None else None   # (the writer's)
                report.repaired_snapshot_id = snapshots.write_snapshot(
                    broker, ref, read.replay_query(base, current, complete, last, fixed), position=last)
        else:
            report.duplicates_found = positions
    finally:
        for name in names:
            broker.adapter.drop_temp_table(name)
    if not report.differences and not report.duplicates_found and report.repaired_snapshot_id is None:
        report.new_snapshot_id = snapshots.snapshot(broker, ref)
    return _said(report, started)


def in_window(marks: dict[str, int], window: int) -> dict[str, int]:
    """``marks`` (producer -> integer mark) less the keys a window in entries of ``window`` lets go (R20,
    ``marks.in_key_window``)."""
    kept = in_key_window(pa.table({"producer": pa.array(list(marks), pa.string()),
                                   "sequence_id": pa.array(list(marks.values()), pa.int64())}), window)
    return dict(zip(kept.column("producer").to_pylist(), kept.column("sequence_id").to_pylist()))


def _said(report: Report, started: float) -> Report:
    """``report``, once its findings are logged in one line (from its figures: no query of its own)."""
    if report.missing_state:
        state = "no complete snapshot"
    else:
        state = (f"snapshot {report.snapshot_id} and {report.replayed:,} replayed entries, {report.producers:,} "
                 "producers")
    start = report.checked_from
    against = ("nothing: deduplication is disabled" if start is None else "a replay of the whole log"
               if start["snapshot_id"] is None else f"a replay from snapshot {start['snapshot_id']}")
    wrote = (f"repaired as snapshot {report.repaired_snapshot_id}" if report.repaired_snapshot_id is not None else
             f"took snapshot {report.new_snapshot_id}" if report.new_snapshot_id is not None else "wrote nothing")
    _log.info("[%s] checked the state (%s; log end %s) against %s: %s producers differ, %s marks of the start wrong, "
              "%s duplicates, %s foreign rows; %s in %.2f s", report.topic, state, f"{report.last_position:,}",
              against, f"{len(report.differences):,}", f"{report.start_differences_found:,}",
              f"{report.duplicates_found:,}", f"{report.foreign_rows:,}", wrote, time.monotonic() - started)
    return report


def _foreign(adapter, ref, report: Report) -> None:
    """The rows of the topic seqdedup did not write, as committed, into the report."""
    foreign = find_foreign(adapter.committed_reads(), ref)
    report.foreign_rows, report.foreign_partitions, report.foreign = foreign.rows, foreign.partitions, foreign.message


def _without_state(broker: Broker, read: "_Reader", applied, last: int, repair: bool) -> Report:
    """The report on a topic with no complete snapshot: the state is missing. With ``repair``, rebuilt from a replay
    of the whole log (an empty snapshot where deduplication is disabled), in a commit of its own."""
    ref = read.ref
    report = Report(topic=ref.key, last_position=last, snapshot_id=None, snapshot_position=None,
                    replayed=read.count(0, last), producers=0, checked_from=asdict(WHOLE_LOG), missing_state=True)
    # (not one id twice: an id written again after its producer was purged is none, and the purges are unknown)
    report.duplicate_positions, report.duplicates_found = read.duplicates(["_position"], read.entries(0, last))
    _foreign(broker.adapter, ref, report)
    if not repair:
        return report
    enabled = applied.deduplication_enabled
    writer = broker.writer
    with writer:
        try:
            with writer.commit(ref) as commit:
                report.repaired_snapshot_id = broker.catalog.write_snapshot(
                    ref, read.replay_query(WHOLE_LOG, None, [], last) if enabled else None, header=None,
                    position=last, kind="repair" if enabled else "disabled", now=broker.clock(),
                    commit=commit.number, max_producers=applied.max_producers_in_snapshot, id_parts=read.id_parts)
        finally:
            writer.forget(ref)      # recovered on next use, from the snapshot just written
    return report


@dataclass(frozen=True)
class History:
    """What the topic's policies ever were (``Catalog.history``), for what a snapshot may have left out."""

    ever_disabled: bool            # deduplication was disabled at some point (R10: an enable forgets every mark)
    ever_capped: bool              # max_producers_in_snapshot was set at some point (R12: a snapshot leaves some out)
    shortest_timeout: int | None   # the shortest producer_inactivity_timeout ever in force (R11); None: never purged


class _Reader:
    """Reads of one topic's log and snapshot rows, committed only, as of a position of the log (through
    ``adapter``; its policies' history through ``committed``, the catalog as committed)."""

    def __init__(self, adapter, committed: Catalog, ref, id_parts: int | None = None):
        self.adapter, self.committed, self.ref = adapter, committed, ref
        self.id_parts = id_parts      # the topic's composite ids (R19): its marks are text, in their own column
        self.visible = adapter.storage.visible_commits(ref, include_open=False)   # published commits' catalog rows
        self.own = adapter.storage.own_rows(ref)      # the topic's rows seqdedup wrote (foreign ones are reported)

    def rows(self, query: exp.Expression) -> list[tuple]:
        return self.adapter.fetchall(query, committed=True)

    def one(self, query: exp.Expression):
        return self.rows(query)[0][0]

    def history(self) -> History:
        applied = self.committed.history(self.ref)
        timeouts = [p.producer_inactivity_timeout for p in applied if p.producer_inactivity_timeout is not None]
        return History(ever_disabled=any(not p.deduplication_enabled for p in applied),
                       ever_capped=any(p.max_producers_in_snapshot is not None for p in applied),
                       shortest_timeout=min(timeouts, default=None))

    def _snapshot_rows(self, *conditions: exp.Expression) -> exp.Select:
        return exp.select("*").from_(snapshot_marks(self.id_parts)).where(
            exp.and_(exp.column("topic").eq(literal(self.ref.key)), self.visible.copy(), *conditions))

    def headers(self) -> list[tuple]:
        """The complete snapshots, newest first, as ``complete_snapshots`` gives them."""
        return complete_snapshots(self.rows(snapshot_headers_query(self.ref.key, self.visible.copy())))

    def _entries(self, after: int, upto: int) -> exp.Expression:
        position = exp.column("_position")
        return exp.and_(position > after, position.copy() <= upto, self.own.copy())

    def entries(self, after: int, upto: int) -> exp.Select:
        """The topic's entries after ``after`` up to ``upto``."""
        return exp.select("*").from_(self.ref.table.copy()).where(self._entries(after, upto))

    # --- the snapshot the check starts from ---------------------------------------------------------------------

    def start(self, report: Report, row: tuple | None) -> tuple[Header, pa.Table | None]:
        """Where the check replays from: the snapshot where the state last started over (``row``, as
        ``complete_snapshots`` gives it), held against the log (see the module's text); what the log contradicts
        goes into ``report``. Returns the start, and the marks the log gives in place of the snapshot's for the
        producers it contradicts (producer, sequence_id: NULL for none, last_publish_time; None: no such producer),
        which ``replay_query`` reads as a relation."""
        if row is None:             # not kept (removed around seqdedup): the whole log
            return WHOLE_LOG, None
        start = Header(*row[:3])
        taken_at, producers = row[3], row[6]
        if start.kind == "enabled" and start.position > 0 and not self.history().ever_disabled:
            report.start_refused = (f"snapshot {start.snapshot_id} is an enabled snapshot at position "
                                    f"{start.position}, which forgets every mark (R10), but the topic's policies "
                                    "never disabled deduplication: the check replays the whole log")
            return WHOLE_LOG, None
        if start.position <= 0 or (not producers and start.kind != "purge"):
            return start, None      # nothing before it to hold it against, or nothing it holds or lacks to check
        wrong = self._held_marks(start, emptied=start.kind == "enabled")
        if start.kind == "purge":
            wrong += self._purged(start, taken_at)
        if not wrong:
            return start, None
        report.start_differences_found = len(wrong)
        report.start_differences = [{"producer": p, "snapshot": m, "log": h} for p, m, h, _ in sorted(
            wrong, key=lambda w: w[0])[:EXAMPLES]]
        corrected = pa.table({"producer": pa.array([w[0] for w in wrong], pa.string()),
                              "sequence_id": pa.array([w[2] for w in wrong], arrow_type(self.id_parts)),
                              "last_publish_time": pa.array([w[3] for w in wrong], pa.timestamp("us"))})
        return start, corrected

    def _written(self, start: Header) -> exp.Select:
        """The topic's entries at or below the start's position."""
        return (exp.select("_producer", "_highest_sequence_id", "_position", "_publish_time")
                .from_(self.ref.table.copy()).where(self._entries(0, start.position)))

    def _held_marks(self, start: Header, *, emptied: bool) -> list[tuple]:
        """(producer, its mark in the snapshot, the highest id it wrote up to there, when it last wrote) of each
        producer whose mark there the log contradicts: no entry of it up to there has that id, or one after the
        last that has it holds a higher id. ``emptied`` (an enabled snapshot, which forgot every mark, R10): every
        producer it holds, with no mark."""
        mark, highest = exp.column("sequence_id", "s"), exp.column("_highest_sequence_id", "e")
        position = exp.column("_position", "e")
        at = exp.Max(this=exp.Case(ifs=[exp.If(this=highest.eq(mark), true=position.copy())]))
        above = exp.Max(this=exp.Case(ifs=[exp.If(this=highest.copy() > mark.copy(), true=position.copy())]))
        held = self._snapshot_rows(exp.column("snapshot_id").eq(literal(start.snapshot_id)),
                                   exp.not_(exp.column("producer").is_(exp.null())))
        query = (exp.select("s.producer", mark.copy(), exp.Max(this=highest.copy()),
                            exp.Max(this=exp.column("_publish_time", "e")))
                 .from_(held.subquery("s"))
                 .join(self._written(start).subquery("e"), on="e._producer = s.producer", join_type="left")
                 .group_by("s.producer", mark.copy()))
        if emptied:
            return [(producer, held_mark, None, None) for producer, held_mark, _, _ in self.rows(query)]
        wrote = exp.Count(this=position.copy()) > 0
        return [tuple(row) for row in self.rows(query.having(exp.and_(wrote, exp.or_(at.is_(exp.null()),
                                                                                    above > at.copy()))))]

    def _purged(self, start: Header, taken_at: dt.datetime) -> list[tuple]:
        """(producer, None, the highest id it wrote up to there, when it last wrote) of each producer a purge
        snapshot lacks that cannot have been idle when it was taken: it wrote after a producer the snapshot keeps;
        or, where deduplication was never disabled and no cap ever left producers out, within the shortest timeout
        the topic ever had (or any, where no timeout ever applied)."""
        held = self._snapshot_rows(exp.column("snapshot_id").eq(literal(start.snapshot_id)),
                                   exp.not_(exp.column("producer").is_(exp.null())))
        published = exp.Max(this=exp.column("_publish_time", "e"))
        kept = self.one(exp.select(exp.Min(this=exp.column("last_publish_time"))).from_(held.subquery("k")))
        busy = [published > literal(kept)] if kept is not None else []
        history = self.history()
        if not history.ever_disabled and not history.ever_capped:
            if history.shortest_timeout is None:
                busy.append(exp.true())
            else:
                busy.append(published.copy() >= literal(taken_at - dt.timedelta(minutes=history.shortest_timeout)))
        if not busy:
            return []
        query = (exp.select("e._producer", exp.cast(exp.null(), id_type(self.id_parts)),
                            exp.Max(this=exp.column("_highest_sequence_id", "e")), published.copy())
                 .from_(self._written(start).subquery("e"))
                 .join(held.subquery("s"), on="s.producer = e._producer", join_type="anti")
                 .group_by("e._producer").having(exp.or_(*busy)))
        return [tuple(row) for row in self.rows(query)]

    # --- the replays ----------------------------------------------------------------------------------------------

    def _marks(self, rows: exp.Query, replay: exp.Query) -> exp.Select:
        both = exp.union(rows, replay, distinct=False).subquery("m")
        return (exp.select("producer", exp.alias_(exp.Max(this=exp.column("sequence_id")), "sequence_id"),
                           exp.alias_(exp.Max(this=exp.column("last_publish_time")), "last_publish_time"))
                .from_(both).group_by("producer").having(exp.Max(this=exp.column("sequence_id")).is_(exp.null()).not_()))

    def chain_query(self, chain: SnapshotHeader, upto: int) -> exp.Select:
        """(producer, sequence_id, last_publish_time): the chain's rows, the newest per producer (a tombstone drops
        the producer), plus a replay of the entries after the chain up to ``upto``: the state as a session has it."""
        newest = exp.Window(this=exp.RowNumber(), partition_by=[exp.column("producer")], order=exp.Order(
            expressions=[exp.Ordered(this=exp.column("snapshot_id"), desc=True)]))
        rows = (exp.select("producer", "sequence_id", "last_publish_time", exp.alias_(newest, "newest"))
                .from_(self._snapshot_rows(exp.column("snapshot_id").isin(*[literal(i) for i in chain.chain]),
                                           exp.not_(exp.column("producer").is_(exp.null()))).subquery("s")))
        rows = exp.select("producer", "sequence_id", "last_publish_time").from_(rows.subquery("r")).where(
            exp.column("newest").eq(1))
        replay = (exp.select("_producer", "_highest_sequence_id", "_publish_time").from_(self.ref.table.copy())
                  .where(self._entries(chain.position, upto)))
        return self._marks(rows, replay)

    def _gone(self, start: Header, chain: SnapshotHeader | None, complete: list[int]) -> exp.Select:
        """(producer, gone): the position of each producer's last tombstone in the complete snapshots after
        ``start`` (up to the chain's last): it was purged there, and what it wrote up to it no longer counts."""
        later = [literal(i) for i in complete
                 if (start.snapshot_id or 0) < i <= (chain.snapshot_id if chain is not None else 0)]
        return (exp.select("producer", exp.alias_(exp.Max(this=exp.column("position")), "gone"))
                .from_(self._snapshot_rows(exp.column("snapshot_id").isin(*later) if later else exp.false(),
                                           exp.not_(exp.column("producer").is_(exp.null())),
                                           exp.column("sequence_id").is_(exp.null())).subquery("t"))
                .group_by("producer"))

    def live_entries(self, start: Header, chain: SnapshotHeader | None, complete: list[int],
                     upto: int) -> exp.Select:
        """The entries after ``start`` up to ``upto`` that count: each after its producer's last tombstone."""
        return (exp.select("e.*").from_(self.ref.table.copy().as_("e"))
                .join(self._gone(start, chain, complete).subquery("g"), on="g.producer = e._producer",
                      join_type="left")
                .where(exp.and_(self._entries(start.position, upto),
                                exp.column("_position", "e") > exp.func("coalesce", exp.column("gone", "g"),
                                                                      literal(-1)))))

    def replay_query(self, start: Header, chain: SnapshotHeader | None, complete: list[int], upto: int,
                     corrected: exp.Table | None = None) -> exp.Select:
        """(producer, sequence_id, last_publish_time) the slow way: the rows of ``start`` (none for the whole log),
        then every entry after it up to ``upto``, less what the tombstones after it purged (``live_entries``; a
        producer's rows in ``start`` count unless it was purged since). ``corrected``: the marks that replace the
        start's for the producers the log contradicts (``start``; a NULL mark: none)."""
        in_start = exp.column("snapshot_id").eq(literal(start.snapshot_id)) if start.snapshot_id else exp.false()
        rows = (exp.select("s.producer", "s.sequence_id", "s.last_publish_time")
                .from_(self._snapshot_rows(in_start, exp.not_(exp.column("producer").is_(exp.null()))).subquery("s")))
        if corrected is not None:
            rows = rows.join(corrected.copy().as_("c"), on="c.producer = s.producer", join_type="anti")
            rows = exp.union(rows, exp.select("producer", "sequence_id", "last_publish_time").from_(corrected.copy()),
                             distinct=False)
            rows = exp.select("s.producer", "s.sequence_id", "s.last_publish_time").from_(rows.subquery("s"))
        rows = rows.join(self._gone(start, chain, complete).subquery("g"), on="g.producer = s.producer",
                         join_type="anti")
        replay = exp.select("_producer", "_highest_sequence_id", "_publish_time").from_(
            self.live_entries(start, chain, complete, upto).subquery("l"))
        return self._marks(rows, replay)

    def marks(self, query: exp.Select) -> dict[str, int | tuple[int, ...]]:
        """Each producer's mark (a composite one as its tuple, R19: as a report shows it)."""
        return {p: s if self.id_parts is None else decoded(s) for p, s, _ in self.rows(query)}

    def count(self, after: int, upto: int) -> int:
        return self.one(exp.select(exp.Count(this=exp.Star())).from_(self.ref.table.copy())
                        .where(self._entries(after, upto)))

    def keys_within(self, entries: exp.Select, window: int) -> tuple[list[dict], int]:
        """Examples of keys (R20) of ``entries`` (of keys) written again at most ``window`` keyed entries after their
        last entry (so while it was in a window in entries), and how many such keys."""
        by_position = exp.Order(expressions=[exp.Ordered(this=exp.column("_position"))])
        numbered = exp.select("_producer", "_position", exp.alias_(
            exp.Window(this=exp.RowNumber(), order=by_position), "ordinal")).from_(entries.subquery("e"))
        before = exp.Window(this=exp.func("lag", exp.column("ordinal")), partition_by=[exp.column("_producer")],
                            order=by_position.copy())
        apart = exp.select("_producer", exp.alias_(literal(0), "_sequence_id"),
                           exp.alias_(exp.column("ordinal") - before, "apart")).from_(numbered.subquery("n"))
        again = exp.select("_producer", "_sequence_id").from_(apart.subquery("a")).where(
            exp.column("apart") <= literal(window))
        return self.duplicates(["_producer", "_sequence_id"], again, more_than=0)

    def duplicates(self, keys: list[str], entries: exp.Select, more_than: int = 1) -> tuple[list[dict], int]:
        """Examples of ``keys`` values that more than one of ``entries`` has (more than ``more_than``), and how many
        values do."""
        repeated = (exp.select(*keys, exp.alias_(exp.Count(this=exp.Star()), "entries"))
                    .from_(entries.subquery("x")).group_by(*keys)
                    .having(exp.Count(this=exp.Star()) > more_than))
        total = self.one(exp.select(exp.Count(this=exp.Star())).from_(repeated.subquery("d")))
        if not total:
            return [], 0
        names = [k.lstrip("_") for k in keys] + ["rows"]
        examples = self.rows(repeated.order_by(*keys).limit(EXAMPLES))
        return [dict(zip(names, row)) for row in examples], total
