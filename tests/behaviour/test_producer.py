"""The Producer, the client side of PIP 6, on every engine: names (R14, for producers and statements alike), resuming
after the mark (R13, C06, C07, C16), explicit ids with holes and disorder (R1, R3), refused sends (R4), per-entry
receipts (R5), sends whose outcome is unknown, retried under the same ids (R6), and producers closed with their
session.

A send costs a few statements, and a statement costs seconds on Spark: each test makes few sends and checks much.
"""
from __future__ import annotations

import os
import threading

import pandas as pd
import pyarrow as pa
import pytest

from seqdedup import InvalidEntryError, TopicError, failpoints
from seqdedup.errors import OutcomeUnknownError, ProducerError
from seqdedup.clients.producer import MAX_ID, SeqdedupWarning


@pytest.fixture(autouse=True)
def no_leftover_faults():
    """A test that fails half-way must not leave injected faults for the next one."""
    yield
    failpoints._injected.clear()


def topic_rows(dedup, topic: str = "events") -> dict[tuple[str, int], int]:
    """(producer, sequence id) -> position, asserting that no pair is in the topic twice."""
    rows = dedup.session.sql(f"SELECT _producer, _sequence_id, _position FROM {topic}").rows
    found = {(p, s): pos for p, s, pos in rows}
    assert len(found) == len(rows), f"an entry is in topic {topic} twice: {sorted(rows)}"
    return found


def outcomes(receipts) -> list[tuple[int, bool]]:
    return [(r.sequence_id, r.duplicate) for r in receipts]


def test_generated_names_are_unique_and_one_name_has_one_live_producer_per_topic(dedup):
    dedup.topic()
    dedup.topic("other")
    first, second = dedup.session.producer("events"), dedup.session.producer("events")
    assert first.name != second.name and str(os.getpid()) in first.name
    # R14: a second live producer with a name already connected to the topic is refused ...
    named = dedup.session.producer("events", name="n")
    with pytest.raises(ProducerError, match="'n' is already connected"):
        dedup.session.producer("events", name="n")
    # ... on that topic only, and until the first is closed
    dedup.session.producer("other", name="n").close()
    named.close()
    with pytest.raises(ProducerError, match="closed"):
        named.send([("x",)])
    with dedup.session.producer("events", name="n") as again:
        assert outcomes(again.send([("a",)])) == [(0, False)]
    dedup.session.producer("events", name="n").close()      # the with block closed it
    assert dedup.ids("n") == [0]


def test_c06_c07_a_producer_with_the_same_name_resumes_after_its_mark_with_and_without_a_restart(dedup):
    dedup.topic(snapshot_interval_entries=1000)
    with dedup.session.producer("events", name="n") as producer:
        assert producer.last_sequence_id == -1
        singles = [producer.send([(f"m{s}",)]) for s in range(10)]      # C06: 10 single statements
        assert [outcomes(r) for r in singles] == [[(s, False)] for s in range(10)]
    # a single entry's receipt comes from its statement's count, not the topic: the position the topic gave it
    positions = topic_rows(dedup)
    assert [r.positions for r in singles] == [[positions[("n", s)]] for s in range(10)]
    # C06: a new producer object with the name
    with dedup.session.producer("events", name="n") as producer:
        assert producer.last_sequence_id == 9
        assert outcomes(producer.send([("m10",)])) == [(10, False)]
    # C07: a restart before any snapshot was taken: the mark comes back from replay alone
    dedup.restart()
    assert [r[-1] for r in dedup.snapshot_rows()] == ["enabled"]
    with dedup.session.producer("events", name="n") as producer:
        assert producer.last_sequence_id == 10
        assert outcomes(producer.send([("m11",)])) == [(11, False)]
        assert producer.last_sequence_id == 11
    assert dedup.ids("n") == list(range(12))


def test_c16_initial_sequence_id_below_the_mark_warns_and_drops_the_automatic_ids_up_to_it(dedup):
    dedup.topic()
    with dedup.session.producer("events", name="n") as producer:
        first = producer.send([(f"m{s}",) for s in range(10)])
    assert (first.written, [r.sequence_id for r in first]) == (10, list(range(10)))
    with pytest.warns(SeqdedupWarning, match=r"automatic ids 5\.\.9 will be dropped"):
        producer = dedup.session.producer("events", name="n", initial_sequence_id=4)
    with producer:
        sends = [producer.send([("again",)]) for _ in range(5)]
        # the Pulsar quirk S-C02: ids 5..9 are duplicates, reported with the positions of the entries they repeat
        assert [outcomes(r) for r in sends] == [[(s, True)] for s in range(5, 10)]
        assert [r.positions[0] for r in sends] == first.positions[5:]
        assert outcomes(producer.send([("new",)])) == [(10, False)]
    assert dedup.ids("n") == list(range(11))
    assert dedup.session.sql("SELECT count(*) FROM events WHERE payload = 'again'").rows == [(0,)]


def test_explicit_ids_with_holes_and_disorder_are_decided_in_arrival_order(dedup):
    dedup.topic()
    with dedup.session.producer("events", name="file") as producer:
        ids = [5, 3, 9, 7, 12, 12, 20]
        first = producer.send([{"payload": f"a{s}", "offset": s} for s in ids], sequence_id="offset")
        assert outcomes(first) == [(5, False), (3, True), (9, False), (7, True), (12, False), (12, True),
                                   (20, False)]
        assert producer.last_sequence_id == 20
        second = producer.send([{"payload": f"b{s}", "offset": s} for s in (10, 21, 15, 30, 9)],
                               sequence_id="offset")
        assert outcomes(second) == [(10, True), (21, False), (15, True), (30, False), (9, True)]
        assert producer.last_sequence_id == 30
    assert sorted(dedup.ids("file")) == [5, 9, 12, 20, 21, 30]
    positions = topic_rows(dedup)
    # R5 per entry: written entries at their topic positions; a repeat of an entry the topic holds answers with the
    # original's position; an id dropped below the mark was never written, so it has no position
    assert first.positions == [positions[("file", s)] if s in (5, 9, 12, 20) else None for s in ids]
    assert second.positions == [None, positions[("file", 21)], None, positions[("file", 30)], positions[("file", 9)]]
    assert len(set(positions.values())) == 6 and dedup.position_problem() is None


def test_refused_sends_write_nothing_and_say_why(dedup):
    dedup.topic()
    producer = dedup.session.producer("events", name="p")
    # R4: a negative id refuses the whole send, the valid entry beside it too
    with pytest.raises(InvalidEntryError, match="negative sequence id"):
        producer.send([{"payload": "a", "id": 1}, {"payload": "b", "id": -3}], sequence_id="id")
    with pytest.raises(InvalidEntryError, match="sequence id column 'id' has type .*integers"):
        producer.send([{"payload": "a", "id": "seven"}], sequence_id="id")
    with pytest.raises(TopicError, match="no column 'seq'"):
        producer.send([{"payload": "a", "id": 1}], sequence_id="seq")
    # a producer's first send fixes its kind of ids (explicit here, though that send was refused)
    with pytest.raises(ProducerError, match="mixing"):
        producer.send([("a",)])
    producer.close()
    dedup.session.create_topic("kinds", {"payload": "STRING", "n": "BIGINT"})
    automatic = dedup.session.producer("kinds", name="q")
    with pytest.raises(TopicError, match=r"unknown columns \['amount'\]; missing columns \['n', 'payload'\]"):
        automatic.send([{"amount": 1}])
    with pytest.raises(TopicError, match=r"unknown columns \['extra'\]"):
        automatic.send(pd.DataFrame({"payload": ["a"], "n": [1], "extra": [1]}))
    with pytest.raises(TopicError, match=r"one value per column \['payload', 'n'\]"):
        automatic.send([("a",)])
    # a value that cannot be cast to its column's type would fail every retry: refused before it is sent
    with pytest.raises(TopicError, match=r"(?i)1 value\(s\) of column 'n' .* do not cast to BIGINT"):
        automatic.send([{"payload": "a", "n": "seven"}, {"payload": "b", "n": "8"}])
    assert dedup.session.sql("SELECT count(*) FROM events").rows == [(0,)]
    # the refused automatic sends took no ids: the first one written gets id 0
    assert outcomes(automatic.send([("a", 1)])) == [(0, False)]
    with pytest.raises(ProducerError, match="mixing"):
        automatic.send([{"payload": "b", "n": 2, "id": 1}], sequence_id="id")
    automatic.close()
    assert dedup.entries("kinds") == [("q", 0, 0)]


def test_every_input_kind_with_its_receipts(dedup):
    dedup.session.create_topic("kinds", {"payload": "STRING", "n": "BIGINT"})
    with dedup.session.producer("kinds", name="p") as producer:
        sends = [
            producer.send([("a", 0), ("b", 1)], sequence_id="n"),                               # tuples
            producer.send([{"payload": "c", "n": 2}, {"n": 3, "payload": "d"}], sequence_id="n"),  # dicts
            producer.send(pd.DataFrame({"n": [4, 5], "payload": ["e", "f"]}), sequence_id="n"),  # pandas
            producer.send(pa.table({"payload": ["f", "g", "h"], "n": [5, 6, 7]}), sequence_id="n"),  # Arrow
        ]
    assert [outcomes(r) for r in sends] == [[(0, False), (1, False)], [(2, False), (3, False)],
                                            [(4, False), (5, False)], [(5, True), (6, False), (7, False)]]
    positions = topic_rows(dedup, "kinds")
    assert [r.positions for r in sends] == [[positions[("p", s)] for s in ids] for ids in ([0, 1], [2, 3], [4, 5],
                                                                                            [5, 6, 7])]
    assert len(set(positions.values())) == 8 and dedup.position_problem("kinds") is None
    assert [(r.written, r.duplicates) for r in sends] == [(2, 0), (2, 0), (2, 0), (2, 1)]
    assert sorted(dedup.session.sql("SELECT n, payload FROM kinds").rows) == [
        (0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (5, "f"), (6, "g"), (7, "h")]


def test_an_unknown_outcome_is_retried_under_the_same_ids_until_settled(dedup):
    dedup.topic()
    with dedup.session.producer("events", name="p") as producer:
        # the commit is durable, but its answer is lost: the retry finds the entries and reports them written
        failpoints.inject("after_publish", ConnectionError("lost after the commit"))
        lost = producer.send([("a",), ("b",)])
        # the commit fails before it is published: the retry writes the entries
        failpoints.inject("before_publish", ConnectionError("lost before the commit"))
        failed = producer.send([("c",), ("d",)])
    assert [outcomes(r) for r in (lost, failed)] == [[(0, False), (1, False)], [(2, False), (3, False)]]
    positions = topic_rows(dedup)
    assert lost.positions + failed.positions == [positions[("p", s)] for s in range(4)]
    assert len(set(positions.values())) == 4 and dedup.position_problem() is None


def test_a_send_timeout_leaves_entries_pending_under_their_ids_and_flush_settles_them(dedup):
    dedup.topic()
    # a timeout shorter than any statement: each send or flush makes exactly one attempt
    producer = dedup.session.producer("events", name="p", send_timeout=0.001)
    assert outcomes(producer.send([("a",)])) == [(0, False)]
    failpoints.inject("before_publish", ConnectionError("lost 1"), ConnectionError("lost 2"))
    failpoints.inject("after_publish", ConnectionError("lost 3"))
    with pytest.raises(OutcomeUnknownError, match="not settled") as error:
        producer.send([("b",), ("c",)])
    assert "lost 1" in str(error.value) and producer.pending == 2
    with pytest.raises(OutcomeUnknownError, match="lost 2"):
        producer.flush()
    with pytest.raises(OutcomeUnknownError, match="lost 3"):      # this attempt was written; its answer lost
        producer.flush()
    assert producer.pending == 2
    # settled under the ids they were given (1, 2), as written by this producer's send
    [settled] = producer.flush()
    assert outcomes(settled) == [(1, False), (2, False)] and producer.pending == 0
    assert producer.flush() == []
    assert outcomes(producer.send([("d",)])) == [(3, False)]     # and new entries get new ids
    producer.close()
    positions = topic_rows(dedup)
    assert sorted(positions) == [("p", s) for s in range(4)]
    assert settled.positions == [positions[("p", 1)], positions[("p", 2)]]
    assert dedup.session.sql("SELECT payload FROM events ORDER BY _sequence_id").rows == [
        ("a",), ("b",), ("c",), ("d",)]


def test_a_statement_may_not_write_under_a_name_a_live_producer_holds(dedup):
    """R14 covers statements: one under a producer's name would take the ids the producer sends next, which would
    then come back as duplicates of entries it never sent, pointing at the statement's rows."""
    dedup.topic()
    other = dedup.connect()          # another session of the process: the name is held there too
    statement = ("INSERT INTO events SELECT payload FROM (VALUES ('s2', 'x', 2), ('s0', 'y', 0)) AS t(payload, p, s) "
                 "WHERE is_not_dup(p, s)")
    refused = (r"producer 'x' is connected to topic \S*events \(a live Producer in this process\): a statement may not "
               r"write entries under a name a live producer holds .* close it first .*Nothing was written")
    try:
        with dedup.session.producer("events", name="x") as producer:
            assert outcomes(producer.send([("m0",), ("m1",)])) == [(0, False), (1, False)]
            for session in (dedup.session, other):
                with pytest.raises(ProducerError, match=refused):
                    session.sql(statement)
            sent = producer.send([("m2",), ("m3",)])
        assert outcomes(sent) == [(2, False), (3, False)]
        assert other.sql(statement).written == 1            # closed: the name is free (x 2 is a duplicate now)
    finally:
        other.close()
    positions = topic_rows(dedup)
    assert sent.positions == [positions["x", 2], positions["x", 3]]
    assert sorted(dedup.session.sql("SELECT _producer, _sequence_id, payload FROM events").rows) == [
        ("x", 0, "m0"), ("x", 1, "m1"), ("x", 2, "m2"), ("x", 3, "m3"), ("y", 0, "s0")]


@pytest.mark.connect_ci             # (where a named producer holds a lease, renewed by a thread of its own)
def test_closing_a_session_closes_its_producers_and_frees_their_names(dedup):
    dedup.topic()
    session = dedup.connect()
    producer = session.producer("events", name="closed-with-its-session")
    assert outcomes(producer.send([("a",)])) == [(0, False)]
    session.close()
    # its lease released and its renewals stopped, where it held one (drivers sharing a metastore, Spark Connect)
    assert not [t for t in threading.enumerate() if t.name == "seqdedup-lease-closed-with-its-session"]
    with pytest.raises(ProducerError, match="'closed-with-its-session' is closed; create a new one"):
        producer.send([("b",)])
    producer.close()                 # closing it again changes nothing
    with dedup.session.producer("events", name="closed-with-its-session") as again:     # the name is free
        assert again.last_sequence_id == 0
    assert dedup.ids("closed-with-its-session") == [0]


def test_explicit_ids_beyond_signed_64_bit_are_refused_naming_the_id_and_nothing_is_sent(dedup):
    dedup.topic()
    fix = r"sequence ids are signed 64-bit, 0 to 9223372036854775807\. Give every entry an id in that range\. Nothing"
    with dedup.session.producer("events", name="p") as producer:
        for data, said in [
            ([{"payload": "a", "id": 1}, {"payload": "b", "id": 2**64}],
             r"entry 1 has sequence id 18446744073709551616 in column 'id', which is above 9223372036854775807"),
            ([{"payload": "a", "id": 2**63}], r"entry 0 has sequence id 9223372036854775808 .* above 9223372036854775807"),
            ([{"payload": "a", "id": -2**64}], r"entry 0 has sequence id -18446744073709551616 .* below 0"),
            (pd.DataFrame({"payload": ["a"], "id": pd.Series([2**64], dtype=object)}),
             r"entry 0 has sequence id 18446744073709551616 in column 'id', which is above 9223372036854775807"),
        ]:
            with pytest.raises(InvalidEntryError, match=f"{said}: {fix}"):
                producer.send(data, sequence_id="id")
        # not an integer, or NULL: said as clearly (NULL by the statement, which writes nothing)
        with pytest.raises(InvalidEntryError, match=r"'id' has type DOUBLE; sequence ids are integers \(64-bit signed, "
                                                    r"0 to 9223372036854775807\): give the column integer values"):
            producer.send([{"payload": "a", "id": 1.5}], sequence_id="id")
        with pytest.raises(InvalidEntryError, match="1 entry has a NULL sequence_id"):
            producer.send([{"payload": "a", "id": None}], sequence_id="id")
        # a value of another column beyond 64 bits is the data's problem, named too
        with pytest.raises(TopicError, match=r"entry 0 has the value 18446744073709551616 in column 'payload', which "
                                             r"does not fit a signed 64-bit integer"):
            producer.send([{"payload": 2**64, "id": 1}], sequence_id="id")
        assert producer.pending == 0
        # the edges themselves are ids
        assert outcomes(producer.send([{"payload": "a", "id": 0}, {"payload": "b", "id": MAX_ID}],
                                      sequence_id="id")) == [(0, False), (MAX_ID, False)]
    assert dedup.entries() == [("p", 0, 0), ("p", MAX_ID, MAX_ID)]
