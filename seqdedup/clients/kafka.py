"""Kafka idempotent producers (R15): record batches in, effectively-once entries out.

A Kafka producer is ``(producer_id, producer_epoch)``; it is the seqdedup producer
``kafka_producer_name(producer_id, producer_epoch)`` (``KOP-PID-PREFIX-{id}-{epoch}``, StreamNative KoP's
mapping), and a record batch is a batch entry: ``base_sequence`` is its ``sequence_id`` and ``last_sequence`` its
``highest_sequence_id``. Two things differ from a plain statement, both decided set-based before it runs:

- Fencing: a batch from an epoch lower than one already seen for its producer id (in the topic's state, or
  earlier in the same ingest) is not written and is reported as ``INVALID_PRODUCER_EPOCH``, as a Kafka broker does.
- Duplicates are successes: a batch the topic already has comes back as a duplicate with the position the topic
  holds it at (when it holds exactly that batch), never as ``OUT_OF_ORDER_SEQUENCE_NUMBER``. KoP answered
  duplicates with that error, and current Kafka clients react by bumping the epoch and sending the data again
  under a new name: a duplicate (docs/guides/kafka.md, "The traps").

Not enforced (Pulsar's rules apply instead of Kafka's): strict ``+1`` sequencing within an epoch, and a new
epoch starting at sequence 0; gaps are allowed, as for any seqdedup producer.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL, HIGHEST, PRODUCER, SEQUENCE_ID
from seqdedup.catalog.state import literal
from seqdedup.errors import InvalidEntryError, TopicError

from .frames import load
from .receipts import receipts

PREFIX = "KOP-PID-PREFIX-"
#: The columns a record batch row must have, beside the topic's own.
BATCH_COLUMNS = ("producer_id", "producer_epoch", "base_sequence", "last_sequence")
NAME, FENCED = "__sd_kafka_producer", "__sd_fenced"
NONE, INVALID_PRODUCER_EPOCH = "NONE", "INVALID_PRODUCER_EPOCH"

_counter = itertools.count()


@dataclass(frozen=True)
class BatchReceipt:
    """The broker's answer to one record batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    error: str              # NONE, or INVALID_PRODUCER_EPOCH (fenced: nothing written)
    position: int | None    # the batch's message id in the topic (for a duplicate: where the topic has it)
    duplicate: bool         # a success that wrote nothing: the topic already had the batch

    @property
    def producer(self) -> str:
        return f"{PREFIX}{self.producer_id}-{self.producer_epoch}"


@dataclass
class KafkaResult:
    receipts: list[BatchReceipt]

    @property
    def written(self) -> int:
        return sum(1 for r in self.receipts if r.error == NONE and not r.duplicate)

    @property
    def duplicates(self) -> int:
        return sum(1 for r in self.receipts if r.error == NONE and r.duplicate)

    @property
    def fenced(self) -> int:
        return sum(1 for r in self.receipts if r.error == INVALID_PRODUCER_EPOCH)


def ingest_batches(session, topic: str, batches, *, order_by: str | None = None) -> KafkaResult:
    """Write record batches to ``topic``, each once; returns the answer to each, in arrival order.

    ``batches``: rows (dicts), pandas, Arrow or a Spark DataFrame, arriving in the order given; or the name of a
    table or view, whose arrival order ``order_by`` names (the Kafka offset, say). Each row has the columns of
    ``BATCH_COLUMNS`` and the topic's own.
    """
    target = session.topic(topic)
    adapter = session.adapter
    tag = f"{session.writer.tag}_{next(_counter)}"
    temps = []

    def temp(name: str, query: exp.Expression) -> exp.Table:
        temps.append(f"{name}_{tag}")
        return adapter.create_temp_table(temps[-1], query)

    with session.writer:
        try:
            if isinstance(batches, str):
                if order_by is None:
                    raise TopicError("a table of record batches has no order of its own: give order_by, the column "
                                     "that orders their arrival (the Kafka offset, say)")
                number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[
                    exp.Ordered(this=exp.column(order_by, quoted=True))])) - 1
                stage = temp("__sd_kafka_in", exp.select("*", exp.alias_(number, ARRIVAL)).from_(
                    exp.to_table(batches, dialect=session.dialect)))
            else:
                temps.append(f"__sd_kafka_in_{tag}")
                stage = load(adapter, temps[-1], batches, list(BATCH_COLUMNS) + [c for c, _ in target.user_columns])
            _check(adapter, target, stage)
            marks = session.state(topic).marks.table
            temps.append(f"__sd_kafka_marks_{tag}")
            state = exp.select("producer").from_(adapter.relation(temps[-1], marks))
            decided = temp("__sd_kafka", _fencing(stage, state))
            columns = [exp.to_identifier(c, quoted=True) for c, _ in target.user_columns]
            call = exp.Anonymous(this="is_not_dup", expressions=[
                exp.column(NAME), exp.column("base_sequence"), exp.column("last_sequence")])
            select = (exp.select(*[exp.column(c.copy()) for c in columns]).from_(decided.copy())
                      .where(exp.and_(exp.not_(exp.column(FENCED)), call)).order_by(exp.column(ARRIVAL)))
            result = session.run(exp.insert(select, target.ref.table, columns=columns))
            entries = exp.select(ARRIVAL, exp.alias_(exp.column(NAME), PRODUCER),
                                 exp.alias_(exp.column("base_sequence"), SEQUENCE_ID),
                                 exp.alias_(exp.column("last_sequence"), HIGHEST)).from_(decided.copy())
            outcomes = receipts(adapter, target.ref.table, entries, [result.commit])
            batches_in = adapter.fetchall(exp.select("producer_id", "producer_epoch", FENCED).from_(decided.copy())
                                          .order_by(exp.column(ARRIVAL)))
        finally:
            for name in temps:
                adapter.drop_temp_table(name)
    return KafkaResult([
        BatchReceipt(pid, epoch, base, last, INVALID_PRODUCER_EPOCH if fenced else NONE,
                     None if fenced else position, False if fenced else duplicate)
        for (pid, epoch, fenced), (base, last, position, duplicate) in zip(batches_in, outcomes)])


def _check(adapter, target, stage: exp.Table) -> None:
    """Every column there; producer ids and epochs present and not negative (sequences: is_not_dup checks)."""
    present = {c.lower() for c, _ in adapter.columns(stage)}
    missing = [c for c in list(BATCH_COLUMNS) + [c for c, _ in target.user_columns] if c.lower() not in present]
    if missing:
        raise TopicError(f"the record batches lack columns {missing}; each needs {list(BATCH_COLUMNS)} and the "
                         f"columns of topic {target.ref.key}")
    for column in ("producer_id", "producer_epoch"):
        bad = exp.or_(exp.column(column).is_(exp.null()), exp.column(column) < 0)
        count = adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(stage.copy()).where(bad))[0][0]
        if count:
            raise InvalidEntryError(f"{count} record batches have a NULL or negative {column}; a Kafka producer is "
                                    "a producer id and an epoch, both 0 or more. Nothing was written")


def _fencing(stage: exp.Table, state: exp.Query) -> exp.Select:
    """Each batch with its producer name and whether it is fenced: its epoch is below one seen before it."""
    pid, epoch = exp.column("producer_id", "b"), exp.column("producer_epoch", "b")
    prefix = exp.func("concat", literal(PREFIX), exp.cast(exp.column("producer_id", "k"), "text"), literal("-"))
    known = (
        exp.select(exp.column("producer_id", "k"), exp.alias_(exp.Max(this=exp.TryCast(
            this=exp.Substring(this=exp.column("producer", "s"), start=exp.Length(this=prefix.copy()) + 1),
            to=exp.DataType.build("bigint"), safe=True)), "epoch"))
        .from_(exp.select("producer_id").from_(stage.copy()).distinct().subquery("k"))
        .join(state.subquery("s"), on=exp.StartsWith(this=exp.column("producer", "s"), expression=prefix))
        .group_by(exp.column("producer_id", "k")))
    earlier = exp.Window(this=exp.Max(this=epoch.copy()), partition_by=[pid.copy()], order=exp.Order(
        expressions=[exp.Ordered(this=exp.column(ARRIVAL, "b"))]), spec=exp.WindowSpec(
        kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="1", end_side="PRECEDING"))
    highest = exp.func("greatest", exp.func("coalesce", exp.column("epoch", "k"), exp.convert(-1)),
                       exp.func("coalesce", earlier, exp.convert(-1)))
    return (exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("b")),
                       exp.alias_(exp.func("kafka_producer_name", pid.copy(), epoch.copy()), NAME),
                       exp.alias_(epoch.copy() < highest, FENCED))
            .from_(exp.alias_(stage.copy(), "b"))
            .join(known.subquery("k"), on=exp.column("producer_id", "k").eq(pid.copy()), join_type="left"))
