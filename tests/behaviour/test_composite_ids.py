"""Composite sequence ids (R19) on the engines: a CDC source's position, (lsn, event index), as the id. Generated
statements with ties, equal LSNs, disorder, parts at the top of unsigned 64-bit and restarts agree with the reference
model (``udfs.reference``, which holds R19); a topic's id shape is fixed when it is created, and an id of another
shape, or a part out of range, is refused with nothing written."""
from __future__ import annotations

from decimal import Decimal

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, example, given, settings
from sqlglot import exp

from seqdedup import InvalidEntryError, Reader, RewriteError
from seqdedup.catalog import ids
from seqdedup.catalog.state import literal
from seqdedup.core.recovery import recover
from seqdedup.errors import PolicyError, ProducerError, SeqdedupWarning, TopicError
from seqdedup.udfs import Entry, Policies, SequenceTracker

from ..engines import DISTRIBUTED
from .test_matches_reference import fresh
from .test_one_producer_matches_reference import SPREAD, two_partitions
from .test_payload_conflicts import scratch_tables

U64_MAX = 2**64 - 1
PRODUCERS = ["slot", "other"]
#: LSNs: small ones, and ones past signed 64-bit (a PostgreSQL LSN is an unsigned 64-bit position).
LSNS = [0, 1, 2, 2**63, U64_MAX]


def stage(harness, rows: list[tuple]) -> None:
    """A temporary view ``staging`` of (producer, lsn, index[, payload]) rows, numbered in arrival order; the LSN a
    DECIMAL(20, 0), which holds every unsigned 64-bit value on both engines."""
    padded = [(p, lsn, i, n, payload[0] if payload else f"{p}/{lsn}/{i}")
              for n, (p, lsn, i, *payload) in enumerate(rows)] or [(None, None, None, None, None)]
    values = exp.values([tuple(literal(v) if v is not None else exp.null() for v in row) for row in padded],
                        alias="t", columns=["producer", "lsn", "idx", "arrival", "payload"])
    select = exp.select(exp.cast(exp.column("producer"), "string").as_("producer"),
                        exp.cast(exp.column("lsn"), exp.DataType.build("DECIMAL(20, 0)")).as_("lsn"),
                        exp.cast(exp.column("idx"), "bigint").as_("idx"), "arrival", "payload").from_(values).where(
        exp.true() if rows else exp.false())
    harness.session.adapter.execute(exp.Create(this=exp.table_("staging"), kind="VIEW", replace=True,
                                               expression=select,
                                               properties=exp.Properties(expressions=[exp.TemporaryProperty()])))


def send(harness, rows: list[tuple], ordered: bool = True, topic: str = "cdc"):
    stage(harness, rows)
    return harness.session.sql(f"INSERT INTO {topic} SELECT payload FROM staging WHERE is_not_dup(producer, "
                               f"(lsn, idx)){' ORDER BY arrival' if ordered else ''}")


def entries(harness, topic: str = "cdc") -> list[tuple]:
    """(producer, id as a tuple) of the topic's entries."""
    return [(p, ids.decoded(s)) for p, s in harness.session.sql(
        f"SELECT _producer, _sequence_id FROM {topic} ORDER BY _commit, _producer, _sequence_id").rows]


event = st.tuples(st.sampled_from(PRODUCERS), st.sampled_from(LSNS), st.integers(0, 2))
steps = st.lists(st.one_of(st.tuples(st.lists(event, min_size=1, max_size=8), st.booleans()).map(
    lambda s: ("send", s)), st.just(("restart", None))), min_size=1, max_size=5).filter(
    lambda ss: any(kind == "send" for kind, _ in ss))
EXAMPLES = {"duckdb": 40, "spark": 5, "connect": 4}
#: How a statement is decided: as a small one is; as a large one (marks joined, not looked up in a map, and the rows
#: distributed); and with a producer that holds most of an unordered statement spread over ranges of its ids' text
#: (Spark, in two tasks).
PLANS = {"small": {}, "distributed": DISTRIBUTED, "spread": SPREAD}
#: Repeats and late entries in arrival order (out of order counts each late id once, none that was written), of two
#: producers, one new in the second statement.
LATE = [("send", ([("slot", 5, 0), ("slot", 5, 0), ("slot", 2, 0), ("slot", 2, 0), ("slot", 7, 1)], True)),
        ("send", ([("slot", 5, 0), ("slot", 9, 0), ("slot", 8, 0), ("other", 1, 0), ("slot", 8, 0), ("other", 0, 2),
                   ("other", 0, 2), ("slot", 9, 0)], True)),
        ("send", ([("slot", 12, 0), ("slot", 11, 0), ("slot", 11, 0), ("slot", 10, 5), ("other", 3, 0), ("other", 2, 0),
                   ("slot", 12, 0), ("slot", 13, 0)], True))]

#: Unordered statements one slot dominates, its LSNs far apart (Spark spreads them over ranges), with a replay across
#: a restart.
SPREAD_SLOT = [("send", ([("slot", 0, 0), ("slot", 2**63, 1), ("slot", U64_MAX, 2), ("slot", 2**63, 1),
                          ("other", 1, 0), ("slot", 1, 0), ("slot", 2, 2), ("slot", 2**63, 0)], False)),
               ("restart", None),
               ("send", ([("slot", 2, 2), ("slot", U64_MAX, 2), ("slot", U64_MAX, 3), ("slot", 0, 1),
                          ("slot", U64_MAX, 3), ("other", 0, 0)], False))]


def test_composite_ids_match_the_reference_model(engine, tmp_path_factory):
    @settings(max_examples=EXAMPLES[engine.name], deadline=None, suppress_health_check=[HealthCheck.too_slow],
              derandomize=engine.family == "spark")
    @given(steps=steps, interval=st.sampled_from([1, 2, 1000]), plan=st.sampled_from(list(PLANS)))
    @example(steps=LATE, interval=1000, plan="distributed")
    @example(steps=SPREAD_SLOT, interval=2, plan="spread")
    def check(steps, interval, plan):
        with fresh(engine, tmp_path_factory, adapter=PLANS[plan]) as harness, two_partitions(harness):
            harness.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2,
                                         snapshot_interval_entries=interval)
            model = SequenceTracker(Policies(snapshot_interval_entries=interval), now=0.0)
            for kind, arg in steps:
                if kind == "restart":
                    harness.restart()
                    model = model.recover()
                else:
                    sent_and_checked(harness, model, *arg)

    check()


@pytest.mark.connect_ci
@pytest.mark.parametrize("conflicts", [("record", "ignore"), ("ignore", "record")], ids=["record-then-ignore",
                                                                                      "ignore-then-record"])
def test_out_of_order_counts_each_late_composite_id_once(dedup, conflicts):
    # where the dropped entries are set apart (payload conflicts judged, the default) Spark counts the late ids after
    # its write, from those (by Arrow, or by a query on Spark Connect); where they are not, as it decides. The last
    # two statements have one shape (one text, marks known): the SQL kept for one must not serve the other's policy
    first, then = conflicts
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2, payload_conflicts=first)
    model = SequenceTracker(Policies(), now=0.0)
    for n, (_, (rows, ordered)) in enumerate(LATE):
        if n == len(LATE) - 1:
            dedup.session.alter_topic("cdc", payload_conflicts=then)
        sent_and_checked(dedup, model, rows, ordered)


def sent_and_checked(harness, model: SequenceTracker, rows: list[tuple], ordered: bool) -> None:
    """One statement sent to the engine and to the reference model: they agree on its counts (out of order: the
    distinct ids above the mark the statement began with that none was written with; the model's mark of a
    producer it has not seen is -1, Pulsar's), the topic's entries, its positions and the marks."""
    marks = {p: model.last_sequence_id(p) for p in PRODUCERS}
    result = send(harness, rows, ordered)
    expected = model.apply_statement([Entry(p, (lsn, i)) for p, lsn, i in rows],
                                     order=list(range(len(rows))) if ordered else None)
    assert (result.written, result.duplicates) == (
        sum(expected.written.values()), sum(expected.duplicates.values())), (rows, ordered)
    above = {p: {(lsn, i) for q, lsn, i in rows if q == p and (marks[p] == -1 or (lsn, i) > marks[p])}
             for p in PRODUCERS}
    assert {p.producer: p.out_of_order for p in result.producers if p.out_of_order} == {
        p: len(ids) - expected.written.get(p, 0) for p, ids in above.items()
        if len(ids) > expected.written.get(p, 0)}, (rows, ordered)
    assert sorted(entries(harness)) == sorted((e.producer, e.sequence_id) for e in model.log)
    assert harness.position_problem("cdc") is None
    for producer in PRODUCERS:
        assert harness.session.last_sequence_id("cdc", producer) == model.last_sequence_id(producer)


@pytest.mark.connect_ci
def test_events_that_share_an_lsn_a_replay_and_a_second_server_converge_on_one_copy(dedup):
    # a transaction's events share an LSN (their index tells them apart); a restarted connector replays from an
    # earlier position; a second server replays the same slot under the same name
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
    assert send(dedup, [("slot", 0x16B3748, i) for i in range(3)]).written == 3
    replay = send(dedup, [("slot", 0x16B3748, 1), ("slot", 0x16B3748, 2), ("slot", 0x16B3790, 0),
                          ("slot", 0x16B3790, 1)])
    assert (replay.written, replay.duplicates) == (2, 2)
    dedup.restart()
    second = send(dedup, [("slot", 0x16B3748, 0), ("slot", 0x16B3790, 1)], ordered=False)
    assert (second.written, second.duplicates) == (0, 2)
    assert dedup.session.last_sequence_id("cdc", "slot") == (0x16B3790, 1)
    assert recover(dedup.session.broker, "cdc").ok      # the state, checked against a replay of the log
    assert recover(dedup.session.broker, "cdc", repair=True).ok
    assert [s for _, s in entries(dedup)] == [(0x16B3748, 0), (0x16B3748, 1), (0x16B3748, 2), (0x16B3790, 0),
                                              (0x16B3790, 1)]


def test_recover_names_a_wrong_composite_mark_as_a_tuple_and_repairs_it(dedup):
    from seqdedup.catalog.state import snapshot_insert

    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
    send(dedup, [("slot", 5, 0), ("slot", 5, 1)])
    # a snapshot written outside seqdedup (a restored backup, a bug) that says (9, 0)
    position, commit = dedup.session.sql("SELECT max(_position), max(_commit) FROM cdc").rows[0]
    forged = exp.values([(literal("slot"), literal(ids.encoded((9, 0))), literal(dedup.clock()))], alias="m",
                        columns=["producer", "sequence_id", "last_publish_time"])
    with dedup.session.adapter.parameters({"__sd_attempt": None}):
        dedup.session.adapter.execute(snapshot_insert(dedup.key("cdc"), exp.select("*").from_(forged), snapshot_id=1000,
                                                      position=position, kind="snapshot", now=dedup.clock(),
                                                      commit=commit, id_parts=2))
    dedup.restart()
    assert dedup.session.last_sequence_id("cdc", "slot") == (9, 0)
    report = recover(dedup.session.broker, "cdc")
    assert report.differences == [{"producer": "slot", "state": (9, 0), "log": (5, 1)}]
    assert "slot (state (9, 0), log (5, 1))" in report.problems()
    repaired = recover(dedup.session.broker, "cdc", repair=True)
    assert repaired.ok and repaired.repaired_snapshot_id is not None
    assert dedup.session.last_sequence_id("cdc", "slot") == (5, 1)
    assert send(dedup, [("slot", 5, 1), ("slot", 6, 0)]).written == 1


def test_a_topic_of_one_part_ids_takes_an_unsigned_lsn_past_signed_64_bit(dedup):
    dedup.session.create_topic("lsns", {"payload": "STRING"}, id_parts=1)
    stage(dedup, [("slot", U64_MAX - 1, 0), ("slot", U64_MAX, 0), ("slot", U64_MAX - 1, 0)])
    statement = "INSERT INTO lsns SELECT payload FROM staging WHERE is_not_dup(producer, lsn)"
    result = dedup.session.sql(statement + " ORDER BY arrival")
    assert (result.written, result.duplicates) == (2, 1)
    dedup.restart()
    assert dedup.session.last_sequence_id("lsns", "slot") == (U64_MAX,)
    stage(dedup, [("slot", U64_MAX, 0), ("slot", 7, 0)])
    assert dedup.session.sql(statement).written == 0


@pytest.mark.parametrize("conflicts", ["record", "ignore"])     # (Spark: judged in SQL, or the staged files read)
def test_a_dropped_entry_of_a_composite_id_is_in_the_ledger_with_its_id(dedup, conflicts):
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2, dropped_entries="keys",
                               payload_conflicts=conflicts)
    send(dedup, [("slot", 5, 0), ("slot", 5, 1)])
    result = send(dedup, [("slot", 5, 1), ("slot", 6, 0), ("slot", 6, 0), ("new", 1, 0), ("new", 1, 0)],
                  ordered=False)
    assert (result.written, result.duplicates) == (2, 3)
    ledger = dedup.session.sql("SELECT composite_id, sequence_id, reason FROM seqdedup_dropped "
                               "ORDER BY composite_id, reason").rows
    assert [(ids.decoded(c), s, r) for c, s, r in ledger] == [
        ((1, 0), None, "repeat"), ((5, 1), None, "retry"), ((6, 0), None, "repeat")]
    assert sorted(result.dropped["composite_id"]) == [(1, 0), (5, 1), (6, 0)]     # (the statement's own: tuples)
    read = dedup.session.dropped("cdc")        # (seqdedup dropped: the ids as tuples)
    assert sorted(row[read.columns.index("composite_id")] for row in read.rows) == [(1, 0), (5, 1), (6, 0)]


#: Statements of (producer, lsn, index, payload), and whether in arrival order: retries and repeats with the same
#: payload and with another. Without ORDER BY, an id's copies in one statement are two with two payloads or carry
#: one (which copy is written is the engine's pick, R18's ties: one conflict either way).
CONFLICTING = [([("slot", 5, 0, "a"), ("slot", 5, 1, "a"), ("other", U64_MAX, 0, "a")], True),
               ([("slot", 5, 0, "b"), ("slot", 5, 1, "a"), ("slot", 6, 0, "x"), ("slot", 6, 0, "y"),
                 ("other", U64_MAX, 0, "a"), ("other", U64_MAX, 1, "z"), ("other", U64_MAX, 1, "z")], False),
               ([("slot", 6, 0, "q"), ("slot", 7, 0, "r"), ("slot", 7, 0, "s"), ("other", U64_MAX, 1, "z")], True)]


@pytest.mark.parametrize("kept", ["keys", "rows"])
def test_payload_conflicts_of_composite_ids_are_the_models(dedup, monkeypatch, kept):
    # (Spark, without ORDER BY: each repeat's written copy's fingerprint carried through the write, as the text of
    # the composite id's column, and where the ledger keeps keys the entries judged by Arrow with no table of them;
    # with ORDER BY, the written rows read back)
    made = scratch_tables(monkeypatch)
    by_arrow = kept == "keys" and dedup.engine.family == "spark" and not dedup.session.adapter.remote
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2, dropped_entries=kept,
                               conflict_window_minutes="never")
    model = SequenceTracker(Policies(conflict_window_minutes=None), now=0.0)
    for rows, ordered in CONFLICTING:
        made.clear()
        result = send(dedup, rows, ordered)
        if by_arrow and result.duplicates:
            assert ("__sd_judged" in made) == ordered, made
        expected = model.apply_statement([Entry(p, (lsn, i), None, payload) for p, lsn, i, payload in rows],
                                         now=0.0, order=list(range(len(rows))) if ordered else None)
        assert {p.producer: p.payload_conflicts for p in result.producers if p.payload_conflicts} == \
            expected.conflicts, rows
        frame = result.dropped
        assert sorted(zip(frame["producer"], frame["composite_id"], frame["reason"])) == sorted(
            (p, (lsn, i), reason) for (p, lsn, i, _), reason in zip(rows, expected.reasons) if reason), rows
    assert sorted(entries(dedup)) == sorted((e.producer, e.sequence_id) for e in model.log)


def test_an_id_of_another_shape_or_a_part_out_of_range_is_refused_and_writes_nothing(dedup):
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
    dedup.topic()
    stage(dedup, [("slot", 1, 0)])
    refusals = [
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_not_dup(producer, lsn)", RewriteError, "2 parts"),
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_not_dup(producer, (lsn, idx, idx))", RewriteError,
         "gives 3 parts"),
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_not_dup(producer, (lsn, idx), idx)", RewriteError,
         "no batch entries"),
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_new(producer)", RewriteError, "integer ids"),
        ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, (lsn, idx))", RewriteError,
         "id_parts=2"),
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_not_dup(producer, (lsn, idx - 1))", InvalidEntryError,
         "part that is NULL, negative"),
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_not_dup(producer, (lsn + 18446744073709551615, idx))",
         InvalidEntryError, "above 18446744073709551615"),
        ("INSERT INTO cdc SELECT payload FROM staging WHERE is_not_dup(producer, (lsn, 0.5))", InvalidEntryError,
         "must be an integer"),
    ]
    for statement, error, words in refusals:
        with pytest.raises(error, match=words):
            dedup.session.sql(statement)
    with pytest.raises(TopicError, match="1 to 3"):
        dedup.session.create_topic("wide", {"payload": "STRING"}, id_parts=4)
    assert entries(dedup) == [] and dedup.session.sql("SELECT count(*) FROM events").rows[0][0] == 0


part = st.one_of(st.integers(0, 12), st.integers(0, U64_MAX), st.sampled_from([9, 10, 99, 100, 2**63 - 1, 2**63]))


@given(st.lists(st.lists(part, min_size=2, max_size=2).map(tuple), min_size=2, max_size=20))
def test_the_text_of_a_composite_id_orders_as_its_tuple_and_reads_back(values):
    # (catalog.ids: each part's digit count as a letter, then its digits; every plan compares the text)
    assert sorted(values) == sorted(values, key=ids.encoded)
    assert [ids.decoded(ids.encoded(v)) for v in values] == values


def test_the_engine_spells_and_reads_a_composite_id_as_python_does(dedup):
    values = [(0, 0), (9, 10), (10, 9), (99, 100), (2**63 - 1, 2**63), (U64_MAX, 0), (0, U64_MAX), (23803720, 2)]
    decimal = exp.DataType.build("DECIMAL(20, 0)")
    rows = exp.values([(literal(a), literal(b), literal(i)) for i, (a, b) in enumerate(values)], alias="t",
                      columns=["a", "b", "i"])
    text = ids.encode([exp.cast(exp.column("a"), decimal), exp.cast(exp.column("b"), decimal)])
    spelled = exp.select(exp.alias_(text, "id"), "i").from_(rows).subquery("s")
    read = exp.select("i", "id", *[exp.cast(d, decimal) for d in ids.part_digits(exp.column("id"), 2)]).from_(
        spelled).order_by("id")
    got = dedup.session.adapter.fetchall(read)
    assert [(values[i], text) for i, text, *_ in got] == sorted((v, ids.encoded(v)) for v in values)
    assert [tuple(int(p) for p in parts) for _, _, *parts in got] == sorted(values)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_the_form_a_statement_works_on_orders_as_the_tuple_and_is_stored_as_its_text(dedup, parts):
    # (catalog.ids: inside a statement DuckDB holds one or two parts in a UHUGEINT, Spark the text itself; either
    # way it orders as the tuple, is written as the text, and a mark's text comes back to it unchanged)
    edges = [0, 9, 10, 99, 100, 2**63 - 1, 2**63, U64_MAX]
    values = sorted({tuple(edges[(i * 3 + k * 5) % len(edges)] for k in range(parts)) for i in range(len(edges))} |
                    {(U64_MAX,) * parts, (0,) * parts})
    decimal = exp.DataType.build("DECIMAL(20, 0)")
    names = [f"p{k}" for k in range(parts)]
    rows = exp.values([tuple(literal(v) for v in value) + (literal(i),) for i, value in enumerate(values)],
                      alias="t", columns=[*names, "i"])
    made = exp.select(exp.alias_(ids.working([exp.cast(exp.column(n), decimal) for n in names]), "w"), "i").from_(
        rows).subquery("m")
    stored = ids.stored(exp.column("w"), parts)
    again = ids.stored(ids.from_stored(stored.copy(), parts), parts)
    got = dedup.session.adapter.fetchall(exp.select("i", stored, again).from_(made).order_by("w"))
    assert [values[i] for i, _, _ in got] == values        # (ordered by the working form: the tuples' order)
    assert [(text, back) for _, text, back in got] == [(ids.encoded(v), ids.encoded(v)) for v in values]


def test_the_state_functions_read_composite_ids_in_python_and_in_sql(dedup):
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
    send(dedup, [("slot", U64_MAX, 3)])
    session = dedup.session
    assert [session.dup_status("cdc", "slot", i).value for i in [(U64_MAX, 3), (U64_MAX, 4), (0, 9)]] == \
        ["DUP", "NOT_DUP", "DUP"]
    assert session.dup_status("cdc", "nobody", (0, 0)).value == "NOT_DUP"
    assert session.producer_state("cdc").rows[0][:2] == ("slot", (U64_MAX, 3))
    with pytest.raises(InvalidEntryError, match="tuples of 2 parts"):
        session.dup_status("cdc", "slot", 5)
    row = session.sql(f"SELECT dup_status('cdc', 'slot', ({U64_MAX}, 3)), dup_status('cdc', 'slot', (0, 4)), "
                      f"dup_status('cdc', 'slot', (CAST({U64_MAX} AS DECIMAL(20, 0)), 4)), "
                      "dup_status('cdc', 'nobody', (1, 1)), last_sequence_id('cdc', 'slot'), "
                      "last_sequence_id('cdc', 'nobody')").rows[0]
    assert row[:4] == ("DUP", "DUP", "NOT_DUP", "NOT_DUP")
    struct = row[4].values() if isinstance(row[4], dict) else row[4]     # (DuckDB gives a dict, Spark a Row)
    assert [int(part) for part in struct] == [U64_MAX, 3]
    assert row[5] is None
    state = session.sql("SELECT producer, sequence_id.part2 FROM producer_state('cdc')").rows
    assert [(p, int(part)) for p, part in state] == [("slot", 3)]


def test_with_deduplication_disabled_a_topic_of_composite_ids_writes_every_entry(dedup):
    # (R10: the statement writes every valid entry, through the plan that needs no marks; its outcome's highest id
    # is the text the topic stores: DuckDB works on a UHUGEINT inside the statement, catalog.ids)
    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
    rows = [("slot", U64_MAX, 5), ("slot", 3, 1), ("slot", 3, 1), ("other", 2**63, 0)]
    assert send(dedup, rows, ordered=False).written == 3
    with pytest.warns(SeqdedupWarning):
        dedup.session.alter_topic("cdc", deduplication_enabled=False)
    result = send(dedup, rows, ordered=False)
    assert (result.written, result.duplicates) == (4, 0)
    assert sorted(entries(dedup)) == sorted([("slot", (U64_MAX, 5)), ("slot", (3, 1)), ("other", (2**63, 0))] +
                                            [(p, (lsn, i)) for p, lsn, i in rows])


def test_a_producer_sends_composite_ids_explicitly_and_resumes_after_its_mark(dedup):
    import pyarrow as pa

    dedup.session.create_topic("cdc", {"payload": "STRING"}, id_parts=2)
    lsns = pa.array([7, 7, 2**63 + 5], pa.decimal128(20, 0))       # (an LSN past signed 64-bit: a DECIMAL)
    events = pa.table({"payload": ["a", "b", "c"], "lsn": lsns, "idx": [0, 1, 0]})
    with dedup.session.producer("cdc", name="slot") as producer:
        receipts = producer.send(events, sequence_id=("lsn", "idx"))
        assert [(r.sequence_id, r.duplicate) for r in receipts] == [((7, 0), False), ((7, 1), False),
                                                                     ((2**63 + 5, 0), False)]
        assert producer.last_sequence_id == (2**63 + 5, 0)
        with pytest.raises(ProducerError, match="composite ids of 2 parts"):
            producer.send(events.select(["payload"]))
    dedup.restart()
    with dedup.session.producer("cdc", name="slot") as producer:
        assert producer.last_sequence_id == (2**63 + 5, 0)
        again = producer.send([{"payload": "b", "lsn": Decimal(7), "idx": 1},
                               {"payload": "d", "lsn": Decimal(2**63 + 5), "idx": 1}], sequence_id=["lsn", "idx"])
        assert [(r.sequence_id, r.duplicate) for r in again] == [((7, 1), True), ((2**63 + 5, 1), False)]
    with pytest.raises(ProducerError, match="no initial_sequence_id"):
        dedup.session.producer("cdc", name="other", initial_sequence_id=5)
    read = Reader(dedup.session, "cdc").read()       # (the Reader gives the ids as tuples too)
    ids = read.columns.index("_sequence_id")
    assert [row[ids] for row in read.rows] == [(7, 0), (7, 1), (2**63 + 5, 0), (2**63 + 5, 1)]


def test_a_topic_of_composite_ids_is_created_in_sql_and_its_shape_never_changes(dedup):
    dedup.session.sql("CREATE TABLE cdc (payload STRING) TBLPROPERTIES ('seqdedup.id_parts' = '2')")
    assert dedup.session.topic("cdc").id_parts == 2
    assert send(dedup, [("slot", 3, 1)]).written == 1
    with pytest.raises(PolicyError, match="fixed when it is created"):
        dedup.session.sql("ALTER TABLE cdc SET TBLPROPERTIES ('seqdedup.id_parts' = '3')")
    with pytest.raises(PolicyError, match="fixed when it is created"):
        dedup.session.alter_topic("cdc", id_parts=3)
