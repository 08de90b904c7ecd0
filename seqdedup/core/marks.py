"""A topic's persisted marks (Pulsar's ``highestSequencedPersisted``: per producer, the highest sequence id
persisted and its last write), held so that a statement costs what it touches, not every producer the topic knows.

Folding a statement's thousand new marks into a million would copy the million every time. So ``Marks`` keeps two
levels, as a log-structured merge tree does: a *base* table and the *fresh* marks written since it was made. A
commit folds its marks into the fresh level (a few rows); the fresh level is merged into the base only once it
holds more than an eighth of it, so a merge is paid once per many statements. A statement's producers are found
in the fresh level by a hash probe and in a large base by binary search over its names, sorted once per base.

    >>> marks = Marks.of(pa.table({"producer": ["a", "b"], "sequence_id": [3, 5],
    ...                            "last_publish_time": [dt.datetime(2026, 1, 1)] * 2}))
    >>> marks = marks.folded(pa.table({"producer": ["b", "c"], "sequence_id": [9, 0],
    ...                                "last_publish_time": [dt.datetime(2026, 1, 2)] * 2}))
    >>> marks.num_rows, marks.lookup(pa.array(["c", "b", "x", None])).to_pydict()["sequence_id"]
    (3, [9, 0])
    >>> sorted(marks.table.to_pydict()["sequence_id"]), marks.oldest()
    ([0, 3, 9], datetime.datetime(2026, 1, 1, 0, 0))
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seqdedup.sql.key_window import KEY_PREFIX

#: The columns of the marks (a topic of composite ids, R19, holds its ids as text: ``marks_schema``).
MARKS = pa.schema([("producer", pa.string()), ("sequence_id", pa.int64()),
                   ("last_publish_time", pa.timestamp("us"))])


def marks_schema(ids: pa.DataType | None = None) -> pa.Schema:
    """The marks' columns with ids of type ``ids`` (None: BIGINT's, ``MARKS``)."""
    return MARKS if ids is None or ids == pa.int64() else MARKS.set(1, pa.field("sequence_id", ids))


def _ids_of(table: pa.Table) -> pa.DataType:
    """The type of a marks table's ids as the state holds them: text (composite ids, R19) or BIGINT."""
    kind = table.schema.field("sequence_id").type
    return pa.string() if pa.types.is_string(kind) or pa.types.is_large_string(kind) else pa.int64()

#: A base smaller than this is searched by a hash probe and merged at every commit (a pass over it costs less
#: than sorting it); a larger one is searched through its sorted names.
SEARCHED_ABOVE = 65_536
#: Marks folded with more rows than this use the threads of Arrow's group-by.
THREADED_ABOVE = 100_000
#: Marks folded with at most this many rows (and integer ids) are folded by NumPy (``_folded_by_numpy``).
FOLDED_BY_NUMPY = 4_096
#: Names are found in a large base by a pass over it, not by binary search, once they are more than 1/SCANNED_FROM of it.
SCANNED_FROM = 64
#: The fresh level is merged into a large base once it holds more than 1/MERGE_FRACTION of the base's rows.
MERGE_FRACTION = 8


def marks_table(table: pa.Table | None = None, ids: pa.DataType | None = None) -> pa.Table:
    """``table`` (any Arrow table with the marks' columns: engines differ in time zones and nullability) in the
    marks' schema, its ids of type ``ids`` (None: text where the table's are, else BIGINT); an empty one when
    None."""
    if table is None:
        return marks_schema(ids).empty_table()
    schema = marks_schema(ids or _ids_of(table))
    columns = []
    for field in schema:
        column = table.column(field.name)
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            column = pc.cast(column, pa.timestamp("us", tz=column.type.tz)).cast(pa.timestamp("us"))
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def fold(marks: pa.Table, delta: pa.Table) -> pa.Table:
    """``marks`` and ``delta`` (each one row per producer) as one row per producer: the highest id and the latest
    write of each."""
    if not marks.num_rows:      # (a statement's new producers, or keys: nothing to fold them with)
        return marks_table(delta)
    both = pa.concat_tables([marks, delta])
    if both.num_rows <= FOLDED_BY_NUMPY and _ids_of(marks) == pa.int64() and not any(
            both.column(name).null_count for name in MARKS.names):
        return _folded_by_numpy(both)
    # (threads pay only for large tables: a statement's few marks fold in a fifth of the time without, and a busy
    # machine's scheduler no longer adds a millisecond)
    return marks_table(both.group_by("producer", use_threads=both.num_rows > THREADED_ABOVE).aggregate(
        [("sequence_id", "max"), ("last_publish_time", "max")]).rename_columns(MARKS.names), _ids_of(marks))


def numbered(producers: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The distinct names of ``producers`` (no NULL), and each row's number among them: what NumPy groups a few
    rows by, where an Arrow group-by's fixed cost would be most of the time (``reduced``)."""
    names = pc.unique(producers)
    return names, pc.index_in(producers, value_set=names).to_numpy()


def reduced(ufunc: np.ufunc, start: int, numbers: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Per group of ``numbers`` (0 to ``groups`` - 1), ``values`` reduced by ``ufunc`` (``np.maximum``,
    ``np.minimum``) from ``start``; a group with no value keeps ``start``."""
    found = np.full(groups, start, dtype=np.int64)
    ufunc.at(found, numbers, values)
    return found


def _folded_by_numpy(both: pa.Table) -> pa.Table:
    """``fold`` of a few thousand marks at most, with integer ids and no NULL: each producer's greatest id and
    time, found by NumPy over its number (a small statement folds twice: the marks and those changed since the
    last snapshot)."""
    names, group = numbered(both.column("producer"))

    def greatest(name: str) -> np.ndarray:
        values = both.column(name).to_numpy()       # (a time as its microseconds: NumPy's max of NaT is NaT)
        return reduced(np.maximum, np.iinfo(np.int64).min, group, values.view(np.int64), len(names)).view(
            values.dtype)

    return pa.table([names, greatest("sequence_id"), greatest("last_publish_time")], schema=MARKS)


def _overlaid(base: pa.Table, fresh: pa.Table) -> pa.Table:
    """The rows of ``base`` whose producer ``fresh`` has not, and those of ``fresh``."""
    replaced = pc.is_in(base.column("producer"), value_set=fresh.column("producer"))
    return pa.concat_tables([base.filter(pc.invert(replaced)), fresh])


class _Base:
    """The base level and its orders, made at their first use and shared by every ``Marks`` over this base."""

    def __init__(self, table: pa.Table):
        self.table = table
        self._by_name: tuple[np.ndarray, np.ndarray] | None = None
        self._by_time: np.ndarray | None = None

    def _searched(self) -> None:
        # rows are taken by number once ordered: an engine's result comes in thousands of chunks, slow to take from
        self.table = self.table.combine_chunks()

    def by_name(self) -> tuple[np.ndarray, np.ndarray]:
        """The row numbers in order of producer, and the names in that order."""
        if self._by_name is None:
            self._searched()
            names = self.table.column("producer")
            order = pc.sort_indices(names).to_numpy()
            self._by_name = order, names.take(order).to_numpy(zero_copy_only=False)
        return self._by_name

    def by_time(self) -> np.ndarray:
        """The row numbers in order of last write."""
        if self._by_time is None:
            self._searched()
            self._by_time = pc.sort_indices(self.table.column("last_publish_time")).to_numpy()
        return self._by_time


class Marks:
    """The marks of a topic's producers, one per producer. Never changes: ``folded`` makes new marks."""

    def __init__(self, base: _Base, fresh: pa.Table, size: int, disjoint: bool = True):
        self._base, self.fresh = base, fresh     # a fresh row replaces the base's row of the same producer
        self.num_rows = size                     # producers with a mark
        self._disjoint = disjoint                # no fresh row replaces a base row: the two levels are the marks
        self._table = None if fresh.num_rows else base.table

    @classmethod
    def of(cls, table: pa.Table | None = None, ids: pa.DataType | None = None) -> "Marks":
        """The marks of ``table`` (one row per producer, the marks' columns, ids of type ``ids``: see
        ``marks_table``); none when None."""
        table = marks_table(table, ids)
        return cls(_Base(table), table.schema.empty_table(), table.num_rows)

    def empty(self) -> pa.Table:
        """No marks, in these marks' schema."""
        return self.base.schema.empty_table()

    @property
    def base(self) -> pa.Table:
        """The base level's rows (some replaced by fresh ones)."""
        return self._base.table

    @property
    def table(self) -> pa.Table:
        """Every mark, one row per producer (a pass over the base, made once)."""
        if self._table is None:
            self._table = self._merged()
        return self._table

    def _merged(self) -> pa.Table:
        return pa.concat_tables([self.base, self.fresh]) if self._disjoint else _overlaid(self.base, self.fresh)

    def lookup(self, producers: pa.Array | pa.ChunkedArray) -> pa.Table:
        """The marks of ``producers`` (distinct names): a row for each that has one."""
        names = pc.drop_null(producers).cast(pa.string())
        fresh = self.fresh.filter(pc.is_in(self.fresh.column("producer"), value_set=names))
        rest = pc.filter(names, pc.invert(pc.is_in(names, value_set=fresh.column("producer"))))
        return pa.concat_tables([self._in_base(rest), fresh])

    def _in_base(self, names: pa.Array | pa.ChunkedArray) -> pa.Table:
        if not len(names):
            return self.base.slice(0, 0)
        if self.base.num_rows <= SEARCHED_ABOVE or len(names) * SCANNED_FROM > self.base.num_rows:
            # (a pass over the base probing a hash of the names: less than searching a sorted array of Python
            # strings for each name once they are many, as a statement of keys has, R20)
            return self.base.filter(pc.is_in(self.base.column("producer"), value_set=names))
        order, sorted_names = self._base.by_name()
        wanted = names.to_numpy(zero_copy_only=False)
        # (byte order of UTF-8, as Arrow sorts, is code point order, as Python compares)
        at = np.minimum(np.searchsorted(sorted_names, wanted), len(sorted_names) - 1)
        return self.base.take(order[at[sorted_names[at] == wanted]])

    def folded(self, delta: pa.Table) -> "Marks":
        """These marks with ``delta`` (new marks) folded in: per producer, the highest id and the latest write."""
        if not delta.num_rows:
            return self
        delta = marks_table(delta, _ids_of(self.base))
        if self.base.num_rows + delta.num_rows <= FOLDED_BY_NUMPY:     # (a small base is merged at every commit)
            return Marks.of(fold(self.table, delta))
        names = pc.unique(delta.column("producer"))
        before = self.lookup(names)
        fresh = _overlaid(self.fresh, fold(before, delta))
        size = self.num_rows + len(pc.drop_null(names)) - before.num_rows
        return self._with(fresh, size, disjoint=False)

    def added(self, delta: pa.Table) -> "Marks":
        """These marks with those of ``delta``, producers that have none (a statement's new keys, R20: a key with a
        mark is at it, so a key a statement writes had none): ``folded`` without looking them up."""
        if not delta.num_rows:
            return self
        fresh = pa.concat_tables([self.fresh, marks_table(delta, _ids_of(self.base))])
        return self._with(fresh, self.num_rows + delta.num_rows, disjoint=self._disjoint)

    def _with(self, fresh: pa.Table, size: int, disjoint: bool) -> "Marks":
        """These marks' base with ``fresh`` as its fresh level, merged into a new base once large enough."""
        marks = Marks(self._base, fresh, size, disjoint)
        if self.base.num_rows <= SEARCHED_ABOVE or fresh.num_rows * MERGE_FRACTION > self.base.num_rows:
            return Marks.of(marks._merged())
        return marks

    def oldest(self) -> dt.datetime | None:
        """The earliest last write of any producer (R11). Only the first base rows in order of time can hold it,
        at most one more than the fresh level replaces."""
        if self._table is not None or self.base.num_rows <= SEARCHED_ABOVE:
            return pc.min(self.table.column("last_publish_time")).as_py()
        by_time = self._base.by_time()
        first = self.base.take(by_time[:self.fresh.num_rows + 1])
        live = first.filter(pc.invert(pc.is_in(first.column("producer"), value_set=self.fresh.column("producer"))))
        return pc.min(pa.chunked_array(live.column("last_publish_time").chunks
                                       + self.fresh.column("last_publish_time").chunks,
                                       type=MARKS.field("last_publish_time").type)).as_py()


def keyed(marks: pa.Table) -> pa.ChunkedArray:
    """Which of ``marks`` are keys' (R20: a key's producer name is its digest, ``KEY_PREFIX`` first)."""
    return pc.starts_with(marks.column("producer"), KEY_PREFIX)


def in_key_window(marks: pa.Table, window: int) -> pa.Table:
    """``marks`` less the keys a window in entries of ``window`` lets go (R20): a key's mark is the position it was
    written at, and the last ``window`` keyed entries have as many keys (a key in the window is not written again),
    so the ``window`` highest marks of keys stay. ``marks`` itself where none leaves.

        >>> marks = pa.table({"producer": ["key:a", "p", "key:b", "key:c"], "sequence_id": [4, 1, 9, 7]})
        >>> in_key_window(marks, 2).column("producer").to_pylist()
        ['p', 'key:b', 'key:c']
    """
    is_key = keyed(marks)
    keys = marks.column("sequence_id").filter(is_key).to_numpy()
    if len(keys) <= window:
        return marks
    cutoff = np.partition(keys, len(keys) - window - 1)[len(keys) - window - 1]     # (the highest that leaves)
    return marks.filter(pc.invert(pc.and_(is_key, pc.less_equal(marks.column("sequence_id"), cutoff))))


def unmarked(producers: pa.Array, ids: pa.DataType | None = None) -> pa.Table:
    """Marks rows of ``producers`` with no mark (NULL id, of type ``ids``, and time): tombstones in a snapshot,
    producers the state does not know in a semi-join of it."""
    schema = marks_schema(ids)
    return pa.table({"producer": producers, "sequence_id": pa.nulls(len(producers), schema.field(1).type),
                     "last_publish_time": pa.nulls(len(producers), pa.timestamp("us"))}, schema=schema)


__all__ = ["Marks", "MARKS", "marks_schema", "marks_table", "unmarked", "fold", "keyed", "in_key_window"]
