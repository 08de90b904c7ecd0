"""DataFrames in and out of either kind of session (classic, or a Spark Connect client): Arrow tables as frames
and back, the session a frame belongs to, and aggregates observed on a frame's way to a write (``Observed``)."""
from __future__ import annotations

import functools
import uuid

import pyarrow as pa


def is_remote(thing) -> bool:
    """Whether a SparkSession or DataFrame is Spark Connect's (a client's: no JVM in this process)."""
    return type(thing).__module__.startswith("pyspark.sql.connect")


def same_session(one, other) -> bool:
    """Whether two SparkSessions are one: the same Connect session, or the same session of one JVM (two Python
    objects may wrap it)."""
    if is_remote(one) != is_remote(other):
        return False
    if is_remote(one):
        return one.session_id == other.session_id
    return one is other or one._jsparkSession.equals(other._jsparkSession)


def functions_of(spark):
    """pyspark's functions for this kind of session: in a process that holds no classic SparkContext, the classic
    module's functions fail (and a process may hold both kinds)."""
    if is_remote(spark):
        from pyspark.sql.connect import functions
    else:
        from pyspark.sql import functions
    return functions


def as_spark_binds(rows):
    """An Arrow table whose naive timestamps are instants read as pyspark reads a naive ``datetime`` it binds to a
    parameter: in this process's local time (``datetime.astimezone``), whatever the session's time zone."""
    import datetime as dt

    import pyarrow.compute as pc

    for i, column_field in enumerate(rows.schema):
        if pa.types.is_timestamp(column_field.type) and column_field.type.tz is None:
            column = rows.column(i)
            distinct = pc.unique(column)          # (a catalog row's times: one per statement)
            instants = pa.array([v and v.astimezone(dt.timezone.utc) for v in distinct.to_pylist()],
                                pa.timestamp("us", tz="UTC"))
            rows = rows.set_column(i, column_field.name, pc.take(instants, pc.index_in(column, value_set=distinct)))
    return rows


def frame_of(spark, table, schema=None):
    """A DataFrame of an Arrow table's rows. Its chunks are combined first: pyspark 4.3's ``createDataFrame`` gives
    no row at all for a table whose first record batches are empty (as marks folded from an empty state are): a
    statement then joined no mark, and wrote every retransmitted id again."""
    return spark.createDataFrame(table.combine_chunks(), schema=schema)


def to_arrow(frame):
    """A frame's rows as an Arrow table, as ``toArrow`` gives them. A Connect frame's ``toArrow`` first asks the
    server for the frame's schema (an analysis, a round trip of its own) to cast the rows to it; the schema the rows
    come with serves as well. (A client whose frames lack ``_to_table``, or a reply without a schema: ``toArrow``.)"""
    if not is_remote(frame) or not hasattr(frame, "_to_table"):
        return frame.toArrow()
    table, schema = frame._to_table()
    if schema is None:
        return frame.toArrow()
    return table.cast(arrow_schema_of(schema))


def arrow_schema_of(schema):
    """The Arrow schema ``toArrow`` gives rows of a Spark schema in (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")


def command_rows(frame) -> list[tuple] | None:
    """The rows of a command's result (SHOW PARTITIONS, DESCRIBE) as a Spark Connect server sends them with its
    reply to ``spark.sql``, in the frame's plan: read here, where ``collect`` sends them back to the server to have
    them again (a round trip). None where the plan holds no such rows (a query; a result the server keeps and
    refers to), or holds other columns than strings (read as ``collect`` would convert them)."""
    plan = getattr(frame, "_plan", None)
    relation = getattr(plan, "_plan", None)
    if not is_remote(frame) or type(plan).__name__ != "CachedRelation" or not hasattr(relation, "HasField") or \
            not relation.HasField("local_relation") or not relation.local_relation.HasField("data"):
        return None
    table = pa.ipc.open_stream(relation.local_relation.data).read_all()
    if not all(pa.types.is_string(kind) or pa.types.is_large_string(kind) for kind in table.schema.types):
        return None
    return list(zip(*[column.to_pylist() for column in table.columns]))


def schema_of(arrow_schema):
    """Spark's schema for an Arrow table's, as a classic ``createDataFrame`` of it infers (a timestamp without a
    time zone is a TIMESTAMP, not a TIMESTAMP_NTZ)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType, TimestampNTZType, TimestampType

    return StructType([StructField(f.name, TimestampType(), f.nullable) if isinstance(f.dataType, TimestampNTZType)
                       else f for f in from_arrow_schema(arrow_schema).fields])


@functools.lru_cache(maxsize=4)
def _classes(jvm) -> tuple:
    """The JVM's classes ``Observed`` calls (each look-up of a class is a Py4J round trip)."""
    return jvm.java.lang.String, getattr(jvm, "org.apache.spark.sql.api.python.PythonSQLUtils")


class Observed:
    """Aggregates of a frame observed on its way to a write: one job, no second read of the source. ``frame`` is
    the frame to write; ``values()`` gives the aggregates once it is written."""

    def __init__(self, frame, **metrics):
        if is_remote(frame):
            from pyspark.sql.connect.observation import Observation
        else:
            from pyspark.sql import Observation

        self._columns = [column.alias(name) for name, column in metrics.items()]
        self._source = frame
        self._observation = Observation(f"__sd_observed_{uuid.uuid4().hex[:12]}")
        self.frame = frame.observe(self._observation, *self._columns)

    def values(self) -> dict:
        """Spark records no row when the write ran no task: a read of partitions or tables that hold no file
        (a compaction of commits without entries, a statement over an empty Parquet table), and pyspark's ``get``
        then fails an assertion. The aggregates of no rows are then computed over an empty relation (no scan).
        A Spark Connect client cannot tell that case from aggregates the server did not send (a plan it did not
        see whole): there they are computed over the frame itself, a second job, right in both cases."""
        held = getattr(self._observation, "_jo", None)
        if held is not None:
            if held.getRow().length() == 0:       # (waits for the write, as ``get`` does)
                return self._source.where("false").agg(*self._columns).first().asDict()
        elif not self._observation.get:           # Spark Connect: {} unless the server sent the aggregates
            return self._source.agg(*self._columns).first().asDict()
        return dict(self._observation.get)

    def lines_and_values(self) -> tuple[str, dict]:
        """For a frame observed with one aggregate, a struct of a list of texts (its first field) and a struct of
        other aggregates (its second): the texts as lines of one text, and the other aggregates as a dict. A classic
        session's texts are joined in the JVM and read by themselves, where Py4J carries a text whole: pickled with
        the rest, as ``values`` does, they would cross as bytes in base64, which py4j decodes a byte at a time in
        Python (a statement's outcome of 1M producers: about 20 s). (Joined by the aggregate itself, they would be
        joined again at each task's end: Spark reads an observation's value to report the task's metrics.)"""
        held = getattr(self._observation, "_jo", None)
        if held is not None:
            row = held.getRow()       # (waits for the write)
            if row.length():
                from pyspark.serializers import CPickleSerializer

                strings, utils = _classes(self._source.sparkSession._jvm)
                observed = row.getStruct(0)
                return (strings.join("\n", observed.getList(0)),
                        CPickleSerializer().loads(utils.toPyRow(observed.getStruct(1))).asDict())
        texts, values = next(iter(self.values().values()))
        return "\n".join(texts), values.asDict()


