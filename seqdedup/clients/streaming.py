"""A Structured Streaming sink: each micro-batch of a Spark stream becomes one seqdedup statement.

    query = (frames.writeStream
             .foreachBatch(seqdedup.foreach_batch(session, "events", producer="producer",
                                                  sequence_id="seq", order_by="arrival"))
             .option("checkpointLocation", "/chk/events").start())

Why this is effectively-once. ``foreachBatch`` is at-least-once: a micro-batch whose writes succeeded but whose
commit to the checkpoint did not (driver killed, query failed between the two) runs again after a restart, with the
same batch id and the same rows, because Spark's sources replay the offsets the checkpoint logged for it. Every row
of the replay carries the producer and sequence id it carried the first time, and those ids are now at or below
their producers' marks, so seqdedup drops each of them as a duplicate (R1) and the replay writes nothing. One
micro-batch is one statement, and a statement commits as one unit, so a batch is either in the topic whole or not
at all (on Spark: its partition is registered or not, see ``seqdedup.extensions.spark``), and the replay settles
which. Together: at-least-once delivery into an idempotent, atomic write is effectively-once.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Sequence

from sqlglot import exp

from seqdedup.errors import RewriteError, SeqdedupError, TopicError

from ..core.results import StatementResult

if TYPE_CHECKING:       # (the facade this client is handed; the layers below it never import it)
    from ..session import Session


def batch_statement(topic: exp.Table, view: exp.Table, values: Sequence[str], *, producer: str, sequence_id: str,
                    highest_sequence_id: str | None = None, order_by: Sequence[str] = (),
                    columns: Sequence[str] | None = None) -> exp.Insert:
    """``INSERT INTO topic [(columns)] SELECT values FROM view WHERE is_not_dup(...) [ORDER BY ...]``, as a tree.

    The values are listed, not ``*``: a ``*`` would also give the producer and sequence id columns, which the topic
    keeps in its system columns, and the statement would not fit the topic.

    Example:
        >>> batch_statement(exp.table_("events", db="ns"), exp.table_("b", db="global_temp"), ["payload"],
        ...                 producer="producer", sequence_id="seq", order_by=["arrival"]).sql("spark")
        'INSERT INTO ns.events SELECT `payload` FROM global_temp.b WHERE IS_NOT_DUP(`producer`, `seq`) ORDER BY `arrival`'
    """
    keys = [producer, sequence_id] + ([highest_sequence_id] if highest_sequence_id else [])
    select = (exp.select(*[exp.column(v, quoted=True) for v in values]).from_(view.copy())
              .where(exp.func("is_not_dup", *[exp.column(k, quoted=True) for k in keys])))
    if order_by:
        select = select.order_by(*[exp.column(o, quoted=True) for o in order_by])
    return exp.insert(select, topic.copy(),
                      columns=[exp.to_identifier(c, quoted=True) for c in columns] if columns else None)


class BatchSink:
    """The function ``foreachBatch`` calls, once per micro-batch: ``sink(batch_df, batch_id)``."""

    def __init__(self, session: Session, topic: str, *, producer: str, sequence_id: str,
                 highest_sequence_id: str | None = None, order_by: str | Sequence[str] | None = None,
                 columns: Sequence[str] | None = None):
        if getattr(session.adapter, "spark", None) is None:
            raise SeqdedupError("foreach_batch needs a seqdedup session on the stream's Spark: "
                                "session = seqdedup.connect(spark)")
        self.session = session
        self.ref = session.ref(topic)
        user_columns = [name for name, _ in session.topic(self.ref).user_columns]   # TopicError when unknown
        if columns is not None:
            known = {c.lower() for c in user_columns}
            unknown = [c for c in columns if c.lower() not in known]
            if unknown:
                raise TopicError(f"topic {self.ref.key} has no columns {unknown}; its columns are {user_columns}")
        self.columns = list(columns) if columns is not None else None   # the INSERT's column list, if given
        self.values = list(columns) if columns is not None else user_columns   # frame columns the topic takes
        self.keys = {"producer": producer, "sequence_id": sequence_id}
        if highest_sequence_id is not None:
            self.keys["highest_sequence_id"] = highest_sequence_id
        self.order_by = [order_by] if isinstance(order_by, str) else list(order_by or [])
        self.last_result: StatementResult | None = None   # the last micro-batch's statement (None: it was empty)
        self.last_batch_id: int | None = None

    def _check_frame(self, names: list[str]) -> None:
        """Every column the statement names is in the micro-batch (Spark matches names ignoring case)."""
        have = {n.lower() for n in names}
        for role, column in [*self.keys.items(), *(("order_by", o) for o in self.order_by)]:
            if column.lower() not in have:
                raise RewriteError(f"the micro-batch has no column {column!r} for {role}; its columns are {names}; "
                                   f"pass {role}= the name of one of them")
        missing = [c for c in self.values if c.lower() not in have]
        if missing:
            raise TopicError(f"topic {self.ref.key} takes columns {self.values} but the micro-batch lacks {missing} "
                             f"(its columns are {names}); select or rename them in the stream, or pass columns=")

    def __call__(self, batch_df, batch_id: int) -> None:
        self._check_frame(batch_df.columns)
        self.last_batch_id, self.last_result = batch_id, None
        spark = batch_df.sparkSession
        # foreachBatch hands over a frame of a clone of the stream's SparkSession, so a plain temp view would be
        # invisible to the session seqdedup runs on ([TABLE_OR_VIEW_NOT_FOUND]); a global temp view is shared by
        # every session of the SparkContext. Unique per call: two queries may write at once.
        name = f"__sd_batch_{batch_id}_{uuid.uuid4().hex[:12]}"
        view = exp.table_(exp.to_identifier(name, quoted=True),
                          db=exp.to_identifier(spark.conf.get("spark.sql.globalTempDatabase"), quoted=True))
        # Not cached: the statement reads the batch once (a statement that must read it again, after a straddling
        # batch entry, reads it once more into a table of its own first), and an empty batch publishes nothing.
        batch_df.createOrReplaceGlobalTempView(name)
        try:
            result = self.session.run(batch_statement(
                self.ref.table, view, self.values, **self.keys, order_by=self.order_by, columns=self.columns))
        finally:
            spark.catalog.dropGlobalTempView(name)
        self.last_result = result if result.commit is not None else None


def foreach_batch(session: Session, topic: str, *, producer: str, sequence_id: str,
                  highest_sequence_id: str | None = None, order_by: str | Sequence[str] | None = None,
                  columns: Sequence[str] | None = None) -> BatchSink:
    """A ``foreachBatch`` function that writes each micro-batch into ``topic``, dropping duplicates.

    ``producer``, ``sequence_id`` and ``highest_sequence_id`` name the micro-batch's columns that ``is_not_dup``
    reads; ``order_by`` names the columns of the arrival order inside a micro-batch (without it, entries arrive in
    (producer, sequence id) order); ``columns`` names the topic columns written, from the micro-batch's columns of
    the same names (default: all the topic's columns). An unknown topic or column is a TopicError here, before the
    stream starts; a column the micro-batch lacks is an error of the first batch. The sink keeps the last batch's
    ``StatementResult`` (counts written and dropped per producer) in ``last_result``.
    """
    return BatchSink(session, topic, producer=producer, sequence_id=sequence_id,
                     highest_sequence_id=highest_sequence_id, order_by=order_by, columns=columns)


__all__ = ["foreach_batch", "BatchSink", "batch_statement"]
