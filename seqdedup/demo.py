"""``seqdedup demo``: producers that retry, crash and restart write through ``is_not_dup``; each message lands once.

Every producer owns a durable source of messages (think of a file: the message's offset is its sequence id).
It sends them in statements of 1 to 40 entries, with late repeats inside a statement, rows stored out of order
(the statement's ``ORDER BY arrival`` restores the order they were sent in).
Along the way acknowledgements are lost (the producer sends the same statement again), producers crash (they
restart, ask ``last_sequence_id`` and resend from their source, overlapping what was written), and the writer
itself restarts (a new session recovers the state from the last snapshot plus a replay of the log).
"""
from __future__ import annotations

import random
import time

from sqlglot import exp

from seqdedup.catalog.state import literal

TOPIC_COLUMNS = {"payload": "STRING", "arrival": "BIGINT"}


def _staging(rows: list[tuple]) -> exp.Create:
    values = exp.values([tuple(literal(v) for v in row) for row in rows], alias="t",
                        columns=["producer", "seq", "arrival", "payload"])
    return exp.Create(this=exp.table_("demo_staging"), kind="VIEW", replace=True,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                      expression=exp.select("*").from_(values))


def _topic_name(session) -> str:
    existing = set(session.topics())
    name, n = "demo.events", 1
    while name in existing:
        n += 1
        name = f"demo.events_{n}"
    return name


def run_demo(connect, *, producers: int = 4, messages: int = 1000, seed: int = 7, progress: bool = True,
             where: str = "") -> dict:
    """Run the demo on sessions made by ``connect()`` (called again at every writer restart)."""
    rng = random.Random(seed)
    started = time.perf_counter()
    session = connect()
    topic = _topic_name(session)
    session.create_topic(topic, TOPIC_COLUMNS, snapshot_interval_entries=500)
    insert = exp.insert(
        exp.select("payload", "arrival").from_("demo_staging")
        .where(exp.Anonymous(this="is_not_dup", expressions=[exp.column("producer"), exp.column("seq")]))
        .order_by("arrival"),
        session.ref(topic).table, columns=["payload", "arrival"])
    names = [f"sensor-{i}" for i in range(producers)]
    next_id = {name: 0 for name in names}            # the producer's in-memory next id: lost when it crashes
    counts = {name: {"attempts": 0, "written": 0, "dropped": 0} for name in names}
    events = {"statements": 0, "lost_acks": 0, "producer_crashes": 0, "writer_restarts": 0}
    arrival = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=producers * messages, unit="msg", desc="demo", leave=False, mininterval=0.5,
                   disable=None)   # None: only on a terminal

    def send(name: str, ids: list[int]) -> None:
        nonlocal arrival
        rows = []
        for s in ids + rng.sample(ids, k=min(len(ids), rng.randint(0, 3))):   # some repeats, arriving late
            arrival += 1
            rows.append((name, s, arrival, f"{name}/{s}"))
        rng.shuffle(rows)              # stored out of order: the statement's ORDER BY arrival puts them right
        session.run(_staging(rows))
        result = session.run(insert)
        events["statements"] += 1
        mine = result.by_producer().get(name)
        counts[name]["attempts"] += len(rows)
        counts[name]["written"] += mine.written if mine else 0
        counts[name]["dropped"] += mine.duplicates if mine else 0

    active = list(names)
    while active:
        name = rng.choice(active)
        start = next_id[name]
        ids = list(range(start, min(start + rng.randint(1, 40), messages)))
        send(name, ids)
        luck = rng.random()
        if luck < 0.10:                      # the acknowledgement was lost: send the same statement again
            events["lost_acks"] += 1
            send(name, ids)
        if luck < 0.05 or 0.10 <= luck < 0.14:  # the producer crashes before it records the acknowledgement
            events["producer_crashes"] += 1
            resume = max(0, session.last_sequence_id(topic, name) + 1 - rng.randint(0, 10))
            next_id[name] = resume           # restarts from its source, a little before the mark: all dropped
        else:
            next_id[name] = ids[-1] + 1 if ids else start
        if 0.14 <= luck < 0.16:              # the writer restarts: state comes back from snapshot + replay
            events["writer_restarts"] += 1
            session.close()
            session = connect()
        if next_id[name] >= messages:
            active.remove(name)
        if bar:
            bar.n = sum(min(next_id[n], messages) for n in names)
            bar.refresh()
    if bar:
        bar.close()

    ref = session.ref(topic)
    per_id = exp.select("_producer", "_sequence_id", exp.alias_(exp.Count(this=exp.Star()), "n"),
                        exp.alias_(exp.Max(this=exp.column("payload")), "payload")).from_(ref.table).group_by(
        "_producer", "_sequence_id")
    rows = session.adapter.fetchall(per_id)
    landed_twice = sum(1 for r in rows if r[2] != 1)
    wrong_payload = sum(1 for p, s, n, payload in rows if payload != f"{p}/{s}")
    expected = {(n, s) for n in names for s in range(messages)}
    missing = len(expected - {(p, s) for p, s, _, _ in rows})
    session.close()
    session = connect()     # one more restart: recovery must agree with the log
    from seqdedup.core.recovery import recover

    recovery = recover(session.broker, topic).to_dict()
    marks = {name: session.last_sequence_id(topic, name) for name in names}
    session.close()
    ok = landed_twice == 0 and wrong_payload == 0 and missing == 0 and recovery["matches_full_replay"] is not False \
        and all(m == messages - 1 for m in marks.values())
    lines = [
        f"seqdedup demo: {producers} producers x {messages} messages into {topic} ({where})",
        f"  {events['statements']} statements; {events['lost_acks']} lost acknowledgements resent, "
        f"{events['producer_crashes']} producer crashes, {events['writer_restarts']} writer restarts",
        "",
        f"  {'producer':<12}{'messages':>10}{'sent':>8}{'written':>9}{'dropped':>9}{'last_sequence_id':>18}",
    ]
    for name in names:
        c = counts[name]
        lines.append(f"  {name:<12}{messages:>10}{c['attempts']:>8}{c['written']:>9}{c['dropped']:>9}{marks[name]:>18}")
    lines += [
        "",
        f"  topic holds {len(rows)} entries for {len(expected)} messages: "
        f"{missing} missing, {landed_twice} written twice, {wrong_payload} with a wrong payload",
        f"  recovered state (snapshot {recovery['snapshot_id']} + {recovery['replayed']} replayed entries) "
        f"matches a full replay of the log: {recovery['matches_full_replay']}",
        f"  {'OK: every message landed exactly once' if ok else 'FAILED'} "
        f"({time.perf_counter() - started:.1f} s)",
    ]
    return {"ok": ok, "topic": topic, "where": where, "events": events, "producers": counts,
            "last_sequence_id": marks, "entries": len(rows), "missing": missing, "written_twice": landed_twice,
            "recovery": recovery, "text": "\n".join(lines)}
