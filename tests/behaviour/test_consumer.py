"""The consuming side of effectively-once, on every engine: a Reader walks a topic by position, and ``consume``
stores a consumer's position with its output in one commit of the output table, so an aggregate computed batch by
batch equals the aggregate of the whole topic, after failures and re-runs too.

A statement costs seconds on Spark: each test writes few statements and consumes few batches, and checks much.
"""
from __future__ import annotations

import pytest
from sqlglot import exp

from seqdedup import EngineError, RewriteError, SeqdedupError, TopicError, failpoints
from seqdedup.catalog.state import literal
from seqdedup.clients.consumer import ConsumeBatch, Reader, consume, consumer_position

TOTALS = "SELECT count(*) AS n, sum(amount) AS total FROM new_entries"


@pytest.fixture(autouse=True)
def no_leftover_faults():
    """A test that fails half-way must not leave injected faults for the next one."""
    yield
    failpoints._injected.clear()


def payments(dedup, amounts: list[int], first: int = 0, topic: str = "payments") -> None:
    """One statement writing ``amounts`` to the topic (created on first use), as producer ``till`` with ids from
    ``first``: their positions follow the topic's last one, in id order."""
    if topic not in [key.split(".", 1)[1] for key in dedup.session.topics()]:
        dedup.session.create_topic(topic, {"amount": "BIGINT"})
    values = exp.values([(literal(first + i), literal(a)) for i, a in enumerate(amounts)], alias="t",
                        columns=["seq", "amount"])
    dedup.session.run(exp.Create(this=exp.table_("paid"), kind="VIEW", replace=True,
                                 expression=exp.select("*").from_(values),
                                 properties=exp.Properties(expressions=[exp.TemporaryProperty()])))
    result = dedup.session.sql(f"INSERT INTO {topic} SELECT amount FROM paid WHERE is_not_dup('till', seq) "
                               "ORDER BY seq")
    assert result.written == len(amounts)


def amounts_by_position(dedup, topic: str = "payments") -> list[int]:
    return [r[0] for r in dedup.session.sql(f"SELECT amount FROM {topic} ORDER BY _position").rows]


def totals(dedup, table: str = "totals") -> tuple[int, int, int]:
    """(sum(n), sum(total), number of rows) of an output of TOTALS."""
    n, total, rows = dedup.session.sql(f"SELECT coalesce(sum(n), 0), coalesce(sum(total), 0), count(*) "
                                       f"FROM {table}").rows[0]
    return int(n), int(total), rows


def consumer_rows(dedup, with_attempt: bool = False) -> list[tuple]:
    attempt = ", attempt" if with_attempt else ""
    return [tuple(r) for r in dedup.session.sql(
        f"SELECT consumer, source, topic, position, commit_id{attempt} FROM seqdedup_consumers "
        "ORDER BY topic, consumer, commit_id").rows]


def exists(dedup, table: str) -> bool:
    return bool(dedup.session.adapter.columns(dedup.session.ref(table).table))


def test_reader_starts_after_a_position_earliest_or_latest_and_reads_at_most_max_entries(dedup):
    payments(dedup, [10, 20, 30, 40, 50])
    reader = Reader(dedup.session, "payments", start_after="earliest")
    assert reader.position == 0 and reader.has_more()
    first = reader.read(max_entries=2)
    assert first.columns[:2] == ["amount", "_producer"] and "_position" in first.columns
    at = first.columns.index("_position")
    assert [(r[0], r[at]) for r in first.rows] == [(10, 1), (20, 2)] and reader.position == 2
    assert [r[0] for r in reader.read().rows] == [30, 40, 50] and reader.position == 5
    assert not reader.has_more()
    assert reader.read().rows == [] and reader.position == 5        # nothing new: the position stays
    assert [r[0] for r in Reader(dedup.session, "payments", start_after=3).read().rows] == [40, 50]
    assert Reader(dedup.session, "payments", start_after=99).read(max_entries=1).rows == []

    latest = Reader(dedup.session, "payments", start_after="latest")
    assert latest.position == 5 and not latest.has_more()
    payments(dedup, [60, 70], first=5)
    assert latest.has_more()
    # query() is the SELECT read() runs: users compose it, and it does not move the position
    composed = exp.select(exp.func("sum", exp.column("amount"))).from_(latest.query(max_entries=1).subquery("q"))
    assert dedup.session.run(composed).rows == [(60,)] and latest.position == 5
    assert [r[0] for r in latest.read().rows] == [60, 70] and latest.position == 7
    assert [r[0] for r in reader.read(max_entries=10).rows] == [60, 70]

    for bad in (-1, "middle", True, 2.5, None):
        with pytest.raises(TopicError, match="not a position"):
            Reader(dedup.session, "payments", start_after=bad)
    for bad in (0, -3, "2"):
        with pytest.raises(TopicError, match="max_entries"):
            reader.read(max_entries=bad)
    with pytest.raises(TopicError, match="unknown topic"):
        Reader(dedup.session, "nowhere")


def test_consume_in_batches_equals_the_whole_and_a_rerun_writes_nothing(dedup):
    amounts = [i * 37 % 101 + 1 for i in range(23)]
    payments(dedup, amounts[:13])
    payments(dedup, amounts[13:], first=13)
    batches = consume(dedup.session, "payments", TOTALS, into="totals", consumer="totals", max_entries=10)
    assert [(b.consumed_from, b.consumed_through, b.rows_written) for b in batches] == [
        (0, 10, 1), (10, 20, 1), (20, 23, 1)]
    assert [b.commit for b in batches] == [1, 2, 3]
    assert totals(dedup) == (23, sum(amounts), 3)
    # each output row is the aggregate of its batch, and carries its commit
    rows = dedup.session.sql("SELECT _commit, n, total FROM totals ORDER BY _commit").rows
    assert [tuple(r) for r in rows] == [(1, 10, sum(amounts[:10])), (2, 10, sum(amounts[10:20])),
                                        (3, 3, sum(amounts[20:]))]
    assert consumer_rows(dedup) == [("totals", dedup.key("payments"), dedup.key("totals"), p, c)
                                    for p, c in ((10, 1), (20, 2), (23, 3))]

    # caught up: a re-run writes nothing, before and after a restart
    assert consume(dedup.session, "payments", TOTALS, into="totals", consumer="totals") == []
    dedup.restart()
    assert consumer_position(dedup.session, "payments", into="totals", consumer="totals") == 23
    assert consume(dedup.session, "payments", TOTALS, into="totals", consumer="totals") == []
    assert totals(dedup) == (23, sum(amounts), 3)

    # new entries: consumed from where the consumer stopped; once runs one batch
    more = [5, 6, 7, 8]
    payments(dedup, more, first=23)
    assert consume(dedup.session, "payments", TOTALS, into="totals", consumer="totals", max_entries=3,
                   once=True) == [ConsumeBatch(23, 26, 1, 4)]
    assert consume(dedup.session, "payments", TOTALS, into="totals", consumer="totals") == [
        ConsumeBatch(26, 27, 1, 5)]
    assert totals(dedup) == (27, sum(amounts + more), 5)

    # another consumer of the same topic keeps its own position and output; a batch may write no rows
    big = "SELECT _position AS position, amount FROM new_entries WHERE amount > 90"
    first = consume(dedup.session, "payments", big, into="big_payments", consumer="big", max_entries=2, once=True)
    assert first == [ConsumeBatch(0, 2, 0, 1)]
    assert dedup.session.sql("SELECT count(*) FROM big_payments").rows == [(0,)]
    assert [b.rows_written for b in consume(dedup.session, "payments", big, into="big_payments", consumer="big")] \
        == [sum(a > 90 for a in (amounts + more)[2:])]
    assert sorted(r[0] for r in dedup.session.sql("SELECT amount FROM big_payments").rows) == sorted(
        a for a in (amounts + more)[2:] if a > 90)
    assert consumer_position(dedup.session, "payments", into="totals", consumer="totals") == 27
    assert amounts_by_position(dedup) == amounts + more


def test_the_output_shows_only_committed_batches_and_a_failed_batch_is_consumed_again(dedup):
    amounts = [3, 1, 4, 1, 5, 9, 2, 6]
    payments(dedup, amounts)
    run = dict(session=dedup.session, source="payments", sql=TOTALS, into="totals", consumer="c", max_entries=3)
    assert consume(**run, once=True) == [ConsumeBatch(0, 3, 1, 1)]

    # the engine fails before the commit is published: neither its rows nor its position count
    for point in ("after_output_rows", "before_publish"):
        failpoints.inject(point, ConnectionError(f"lost at {point}"))
        with pytest.raises(ConnectionError):
            consume(**run)
        assert totals(dedup) == (3, 8, 1)
        assert consumer_position(dedup.session, "payments", into="totals", consumer="c") == 3
        assert Reader(dedup.session, "payments", start_after=3).read(max_entries=3).rows  # the source is intact

    # the engine fails after publishing: the batch is in, with its position, and is not consumed twice
    failpoints.inject("after_publish", ConnectionError("lost after the commit"))
    with pytest.raises(ConnectionError):
        consume(**run)
    assert totals(dedup) == (6, 8 + 1 + 5 + 9, 2)
    assert consumer_position(dedup.session, "payments", into="totals", consumer="c") == 6

    batches = consume(**run)
    assert [(b.consumed_from, b.consumed_through) for b in batches] == [(6, 8)]
    assert totals(dedup) == (8, sum(amounts), 3)
    # the failed commits' leftovers (Spark) stay ignored. Where one process publishes, their numbers are not reused;
    # where several may (``contended``: Spark Connect, a shared metastore) a number is reused and the leftover's
    # ``attempt`` is not the one its commit published (docs/engines/spark.md)
    assert batches[0].commit > 2
    output_commits = set(c for c, in dedup.session.sql("SELECT DISTINCT _commit FROM totals").rows)
    rows = [r for r in consumer_rows(dedup, with_attempt=True) if r[4] in output_commits]
    if dedup.session.adapter.contended:
        won = {(commit, attempt) for topic, commit, attempt in dedup.session.sql(
            "SELECT topic, commit_id, attempt FROM seqdedup_commits").rows if topic == dedup.session.ref("totals").key}
        assert len(rows) > 3          # the leftover of the attempt that failed before its publish is there, unseen
        rows = [r for r in rows if (r[4], r[5]) in won]
    assert [r[3] for r in rows] == [3, 6, 8]


def test_bad_input_is_refused_and_changes_nothing(dedup):
    payments(dedup, [1, 2, 3])
    assert consume(dedup.session, "payments", "SELECT count(*) AS n FROM new_entries", into="counts",
                   consumer="c") == [ConsumeBatch(0, 3, 1, 1)]
    payments(dedup, [4], first=3)

    def before():
        return (amounts_by_position(dedup), consumer_rows(dedup), exists(dedup, "fresh"),
                dedup.session.sql("SELECT n, _commit FROM counts").rows)

    unchanged = before()
    cases = [
        (dict(sql="SELECT count(* FROM new_entries"), RewriteError, "cannot parse"),
        (dict(sql="SELECT 1 AS n; SELECT 2 AS n"), RewriteError, "one query"),
        (dict(sql="INSERT INTO counts SELECT 1"), RewriteError, "one query"),
        (dict(sql="SELECT count(nope) AS n FROM new_entries"), EngineError, "nope"),
        (dict(sql="SELECT count(*) AS _commit FROM new_entries"), TopicError, "reserves"),
        (dict(sql="SELECT amount AS n, amount AS N FROM new_entries"), TopicError, "more than once"),
        (dict(sql="SELECT sum(amount) AS total FROM new_entries", into="counts"), TopicError,
         "exists with the columns"),
        (dict(consumer=""), TopicError, "non-empty string"),
        (dict(consumer=None), TopicError, "non-empty string"),
        (dict(max_entries=0), TopicError, "max_entries"),
        (dict(into="payments"), TopicError, "is a topic"),
        (dict(into="seqdedup_consumers"), TopicError, "catalog table"),
        (dict(source="nowhere"), TopicError, "unknown topic"),
    ]
    for change, error, message in cases:
        args = dict(sql="SELECT count(*) AS n FROM new_entries", into="fresh", consumer="c", source="payments")
        args.update(change)
        with pytest.raises(error, match=message) as caught:
            consume(dedup.session, args.pop("source"), args.pop("sql"), **args)
        assert isinstance(caught.value, SeqdedupError)
        assert before() == unchanged, change
    assert consumer_position(dedup.session, "payments", into="counts", consumer="c") == 3


def test_a_version_2_catalog_without_the_consumers_table_opens_and_gets_it(dedup):
    payments(dedup, [1, 2])
    dedup.session.adapter.execute("DROP TABLE seqdedup_consumers")     # as a catalog of an older seqdedup
    dedup.restart()
    assert consume(dedup.session, "payments", TOTALS, into="totals", consumer="c") == [ConsumeBatch(0, 2, 1, 1)]
    assert totals(dedup) == (2, 3, 1)
