"""Recovery (R7): rebuild a topic's state from its last complete snapshot plus a replay, check it, and take a
fresh snapshot at the log's end so that the next start replays nothing."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.state import literal

from .topic_state import load


def full_replay(session, topic: str, after: int) -> dict[str, int]:
    """The marks recomputed from every entry after ``after``: the slow, obviously right answer."""
    ref = session.ref(topic)
    query = (exp.select("_producer", exp.Max(this=exp.column("_highest_sequence_id")))
             .from_(ref.table).where(exp.column("_position") > literal(after)).group_by("_producer"))
    return dict(session.adapter.fetchall(query))


def recover(session, topic: str) -> dict:
    ref = session.ref(topic)
    session.topic(ref)
    current = load(session.committed, session.adapter.committed_reads(), ref)     # from the catalog, not memory
    header, last = current.header, current.end
    state = dict(zip(current.marks.column("producer").to_pylist(), current.marks.column("sequence_id").to_pylist()))
    # The current enablement began at the last "enabled" snapshot; with no purge since, a replay of the whole log
    # from there must give the same marks as the snapshot plus the short replay.
    kinds = session.adapter.fetchall(
        exp.select("kind", exp.Max(this=exp.column("position"))).from_(
            session.catalog.snapshot_headers(ref).subquery("h")).group_by("kind"))
    positions = dict(kinds)
    comparable = header.enabled and positions.get("purge", -1) < positions.get("enabled", 0)
    matches = (full_replay(session, topic, positions.get("enabled", 0)) == state) if comparable else None
    snapshot_id = session.snapshot(topic)
    return {"topic": ref.key, "snapshot_id": header.snapshot_id, "snapshot_position": header.position,
            "replayed": current.since_snapshot, "producers": len(state), "last_position": last,
            "matches_full_replay": matches, "new_snapshot_id": snapshot_id}
