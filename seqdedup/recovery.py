"""Recovery (R7), checked: rebuild a topic's state from its last complete snapshot plus a replay, and hold it against
a replay of the whole log since the state last started over, before anything is written.

The state the session uses is the chain of snapshots (the latest complete full one and its increments, see
``catalog.state.SnapshotHeader``) plus a replay of the entries after it. A snapshot row can
be wrong (written by hand, restored from the wrong backup, a bug): its mark, higher than the log supports, would
then drop new ids up to it. So ``recover`` recomputes the marks the slow, obviously right way too: from the last
full snapshot where the state started over (``enabled``: empty; ``purge``: after dropping idle producers) plus every
entry after it, less the producers a later increment purged (a tombstone at position P drops what the producer
wrote up to P), and compares. (Retention keeps that snapshot: ``Catalog.prune_snapshots``.) It also checks what no
deduplicated topic can hold: two rows at one position, or two rows with one ``(producer, sequence_id)`` since the
state started over.

- Everything agrees: a fresh snapshot is taken at the log's end, so the next start replays nothing.
- The marks differ: nothing is written, and the producers that differ are named, unless ``repair`` is asked for:
  then a snapshot of the replayed marks (kind ``repair``) replaces the wrong state.
- Duplicate rows: reported; seqdedup never deletes topic rows, so they are removed by hand.
- Rows seqdedup did not write (inserted around it, seqdedup/foreign.py): left out of everything above, and counted
  with how to move them aside; they leave the state sound, so they do not make the report fail.

Everything is read as of one position of the log, the last committed one when recovery starts (a commit's entries all
come after the entries of the commits before it), so a writer running meanwhile never makes a false difference.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sqlglot import exp

from seqdedup.catalog.schema import catalog_table
from seqdedup.catalog.state import SnapshotHeader, chain_of, complete_snapshots, literal, snapshot_headers_query

from .foreign import find as find_foreign

#: How many duplicates a report lists (it counts them all).
EXAMPLES = 10
PRODUCER_SEQUENCES = catalog_table("producer_sequences")


@dataclass(frozen=True)
class Header:
    snapshot_id: int
    position: int      # the snapshot covers the entries at or below it
    kind: str          # enabled | disabled | snapshot | purge | repair | increment


@dataclass
class Report:
    """What recovery found, and what it wrote."""

    topic: str
    last_position: int                   # everything was read as of this position of the log
    snapshot_id: int                     # the latest complete snapshot, which the state starts from
    snapshot_position: int
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
    foreign: str | None = None                 # what they are and how to move them aside (seqdedup/foreign.py)

    @property
    def matches_full_replay(self) -> bool | None:
        return None if self.checked_from is None else not self.differences

    @property
    def ok(self) -> bool:
        """Nothing wrong is left: the marks agree (or were repaired) and no entry is in the topic twice."""
        return (not self.differences or self.repaired_snapshot_id is not None) and not self.duplicates_found

    def to_dict(self) -> dict:
        return {**asdict(self), "matches_full_replay": self.matches_full_replay, "ok": self.ok}

    def problems(self) -> str:
        """The problems found, in a sentence each."""
        lines = []
        if self.differences:
            shown = ", ".join(f"{d['producer']} (state {_mark(d['state'])}, log {_mark(d['log'])})"
                              for d in self.differences[:EXAMPLES])
            more = f" and {len(self.differences) - EXAMPLES} more" if len(self.differences) > EXAMPLES else ""
            lines.append(f"the state does not match a replay of the log for {len(self.differences)} producer(s): "
                         f"{shown}{more}")
        if self.duplicates_found:
            shown = [f"position {d['position']} ({d['rows']} rows)" for d in self.duplicate_positions] + [
                f"{d['producer']} id {d['sequence_id']} ({d['rows']} rows)" for d in self.duplicate_ids]
            lines.append(f"the topic holds entries more than once ({self.duplicates_found} positions or producer ids "
                         f"with several rows): {', '.join(shown[:EXAMPLES])}")
        return "; ".join(lines)


def _mark(value: int | None) -> str:
    return "none" if value is None else str(value)


def recover(session, topic: str, *, repair: bool = False) -> Report:
    """Check a topic's recovered state against its log (see the module's text); with ``repair``, replace a state
    that differs with the replayed one. Nothing is written when something is wrong and ``repair`` is not asked."""
    ref = session.ref(topic)
    applied = session.topic(ref).applied
    read = _Reader(session, ref)
    last = read.one(exp.select(exp.func("coalesce", exp.Max(this=exp.column("_position")), literal(0)))
                    .from_(ref.table.copy()).where(read.own.copy()))
    headers = read.headers(last)
    current = chain_of(headers)
    state = read.marks(read.chain_query(current, last))
    start = next((Header(*row[:3]) for row in headers if row[0] == current.start_id), None)
    base = start if current.kind != "disabled" else None
    report = Report(topic=ref.key, last_position=last, snapshot_id=current.snapshot_id,
                    snapshot_position=current.position, replayed=read.count(current.position, last),
                    producers=len(state), checked_from=None if base is None else asdict(base))
    report.duplicate_positions, positions = read.duplicates(["_position"], read.entries(0, last))
    foreign = find_foreign(session.adapter.committed_reads(), ref)
    report.foreign_rows, report.foreign_partitions, report.foreign = foreign.rows, foreign.partitions, foreign.message
    if base is not None:
        complete = [row[0] for row in headers]
        replayed = read.marks(read.replay_query(base, current, complete, last))
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
        report.duplicate_ids, ids = read.duplicates(["_producer", "_sequence_id"], live)
        report.duplicates_found = positions + ids
        if report.differences and repair:
            report.repaired_snapshot_id = session.write_snapshot(
                topic, read.replay_query(base, current, complete, last), position=last)
    else:
        report.duplicates_found = positions
    if not report.differences and not report.duplicates_found:
        report.new_snapshot_id = session.snapshot(topic)
    return report


class _Reader:
    """Reads of one topic's log and snapshot rows, committed only, as of a position of the log."""

    def __init__(self, session, ref):
        self.adapter, self.ref = session.adapter, ref
        self.visible = session.adapter.visible_commits(ref, include_open=False)   # published commits' catalog rows
        self.own = session.adapter.own_rows(ref)      # the topic's rows seqdedup wrote (foreign ones are reported)

    def rows(self, query: exp.Expression) -> list[tuple]:
        return self.adapter.fetchall(query, committed=True)

    def one(self, query: exp.Expression):
        return self.rows(query)[0][0]

    def _snapshot_rows(self, *conditions: exp.Expression) -> exp.Select:
        return exp.select("*").from_(PRODUCER_SEQUENCES.copy()).where(
            exp.and_(exp.column("topic").eq(literal(self.ref.key)), self.visible.copy(), *conditions))

    def headers(self, upto: int) -> list[tuple]:
        """The complete snapshots at or below ``upto``, newest first, as ``complete_snapshots`` gives them."""
        rows = complete_snapshots(self.rows(snapshot_headers_query(self.ref.key, self.visible.copy())))
        return [row for row in rows if row[1] <= upto]

    def _entries(self, after: int, upto: int) -> exp.Expression:
        position = exp.column("_position")
        return exp.and_(position > after, position.copy() <= upto, self.own.copy())

    def entries(self, after: int, upto: int) -> exp.Select:
        """The topic's entries after ``after`` up to ``upto``."""
        return exp.select("*").from_(self.ref.table.copy()).where(self._entries(after, upto))

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

    def _gone(self, start: Header, chain: SnapshotHeader, complete: list[int]) -> exp.Select:
        """(producer, gone): the position of each producer's last tombstone in the complete snapshots after
        ``start`` (up to the chain's last): it was purged there, and what it wrote up to it no longer counts."""
        later = [literal(i) for i in complete if start.snapshot_id < i <= chain.snapshot_id]
        return (exp.select("producer", exp.alias_(exp.Max(this=exp.column("position")), "gone"))
                .from_(self._snapshot_rows(exp.column("snapshot_id").isin(*later) if later else exp.false(),
                                           exp.not_(exp.column("producer").is_(exp.null())),
                                           exp.column("sequence_id").is_(exp.null())).subquery("t"))
                .group_by("producer"))

    def live_entries(self, start: Header, chain: SnapshotHeader, complete: list[int], upto: int) -> exp.Select:
        """The entries after ``start`` up to ``upto`` that count: each after its producer's last tombstone."""
        return (exp.select("e.*").from_(self.ref.table.copy().as_("e"))
                .join(self._gone(start, chain, complete).subquery("g"), on="g.producer = e._producer",
                      join_type="left")
                .where(exp.and_(self._entries(start.position, upto),
                                exp.column("_position", "e") > exp.func("coalesce", exp.column("gone", "g"),
                                                                      literal(-1)))))

    def replay_query(self, start: Header, chain: SnapshotHeader, complete: list[int], upto: int) -> exp.Select:
        """(producer, sequence_id, last_publish_time) the slow way: the rows of ``start``, then every entry after
        it up to ``upto``, less what the tombstones after it purged (``live_entries``; a producer's rows in
        ``start`` count unless it was purged since)."""
        rows = (exp.select("s.producer", "s.sequence_id", "s.last_publish_time")
                .from_(self._snapshot_rows(exp.column("snapshot_id").eq(literal(start.snapshot_id)),
                                           exp.not_(exp.column("producer").is_(exp.null()))).subquery("s"))
                .join(self._gone(start, chain, complete).subquery("g"), on="g.producer = s.producer",
                      join_type="anti"))
        replay = exp.select("_producer", "_highest_sequence_id", "_publish_time").from_(
            self.live_entries(start, chain, complete, upto).subquery("l"))
        return self._marks(rows, replay)

    def marks(self, query: exp.Select) -> dict[str, int]:
        return {p: s for p, s, _ in self.rows(query)}

    def count(self, after: int, upto: int) -> int:
        return self.one(exp.select(exp.Count(this=exp.Star())).from_(self.ref.table.copy())
                        .where(self._entries(after, upto)))

    def duplicates(self, keys: list[str], entries: exp.Select) -> tuple[list[dict], int]:
        """Examples of ``keys`` values that more than one of ``entries`` has, and how many values do."""
        repeated = (exp.select(*keys, exp.alias_(exp.Count(this=exp.Star()), "entries"))
                    .from_(entries.subquery("x")).group_by(*keys)
                    .having(exp.Count(this=exp.Star()) > 1))
        total = self.one(exp.select(exp.Count(this=exp.Star())).from_(repeated.subquery("d")))
        if not total:
            return [], 0
        names = [k.lstrip("_") for k in keys] + ["rows"]
        examples = self.rows(repeated.order_by(*keys).limit(EXAMPLES))
        return [dict(zip(names, row)) for row in examples], total
