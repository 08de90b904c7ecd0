"""What seqdedup returns: statement results with per-producer counts (R5), query rows, and state; each also as a
pyarrow Table (``to_arrow()``), a pandas DataFrame (``to_pandas()``) or a polars DataFrame (``to_polars()``)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Callable

from seqdedup.catalog import ids
from seqdedup.errors import SeqdedupError


def text_table(columns: list[str], rows: list[tuple]) -> str:
    """Rows as text in aligned columns under their names (NULL for None), for a terminal.

    Example:
        >>> print(text_table(["producer", "mark"], [("p1", 4), ("producer 2", None)]))
        producer    mark
        ----------  ----
        p1          4
        producer 2  NULL
    """
    cells = [[str(c) for c in columns]] + [["NULL" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))] if columns else []
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    if lines:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class _Frames:
    """``to_arrow()``, ``to_pandas()`` and ``to_polars()`` of a result whose ``columns_and_rows()`` gives its column
    names and rows."""

    def columns_and_rows(self) -> tuple[list[str], list[tuple]]:
        """The result as a table: its column names and its rows."""
        raise NotImplementedError

    def to_arrow(self):
        """The rows as a pyarrow Table, one column per result column."""
        import pyarrow as pa

        columns, rows = self.columns_and_rows()
        return pa.Table.from_arrays([pa.array([row[i] for row in rows]) for i in range(len(columns))],
                                    names=list(columns))

    def to_pandas(self):
        """The rows as a pandas DataFrame."""
        return self.to_arrow().to_pandas()

    def to_polars(self):
        """The rows as a polars DataFrame."""
        try:
            import polars
        except ImportError:
            raise SeqdedupError("to_polars() needs polars, which is not installed: pip install polars (or take the "
                                "rows with to_arrow() or to_pandas())") from None
        return polars.from_arrow(self.to_arrow())


@dataclass
class ProducerCount:
    producer: str
    written: int                  # entries written to the topic
    duplicates: int               # entries dropped as duplicates (not an error: R5)
    first_position: int | None    # the lowest and highest position written, or None when nothing was
    last_position: int | None
    out_of_order: int = 0         # of the duplicates, those that were no repeat: ids above the producer's mark that
                                  # no entry was written with, because they arrived after a higher id (Pulsar drops
                                  # them too); the others repeat ids the topic or the statement had already
    payload_conflicts: int = 0    # of the duplicates, those whose payload differs from the one the topic holds for
                                  # their id (R18; 0 where the topic's payload_conflicts is ignore)

    @property
    def repeats(self) -> int:
        """The duplicates that repeat an id the topic or the statement had already."""
        return self.duplicates - self.out_of_order


class ProducerCounts(Sequence):
    """A statement's ``ProducerCount``s, made from its outcome (a pyarrow Table with a column for each of their
    fields) only when read: a statement of a million producers returns without making a million objects (1.5 s),
    and its totals are summed by Arrow (``total``).

    Example:
        >>> import pyarrow as pa
        >>> counts = ProducerCounts(pa.table({"producer": ["p1"], "written": [2], "duplicates": [1],
        ...     "first_position": [0], "last_position": [1], "out_of_order": [0], "payload_conflicts": [0]}))
        >>> len(counts), counts.total("written"), counts == [ProducerCount("p1", 2, 1, 0, 1)]
        (1, 2, True)
    """

    def __init__(self, table):
        self._table, self._made = table, None

    def _counts(self) -> list[ProducerCount]:
        if self._made is None:
            columns = [self._table.column(f.name).to_pylist() for f in fields(ProducerCount)]     # (by column: a
            self._made = [ProducerCount(*row) for row in zip(*columns)]             # dict per row costs twice)
        return self._made

    def __len__(self) -> int:
        return self._table.num_rows

    def __getitem__(self, index):
        return self._counts()[index]

    def __iter__(self) -> Iterator[ProducerCount]:
        return iter(self._counts())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    def __repr__(self) -> str:
        return repr(self._counts())

    def total(self, name: str) -> int:
        """The sum of field ``name`` over the producers."""
        import pyarrow.compute as pc

        return pc.sum(self._table.column(name)).as_py() or 0


def _total(producers: Sequence[ProducerCount], name: str) -> int:
    return producers.total(name) if isinstance(producers, ProducerCounts) else sum(getattr(p, name) for p in producers)


@dataclass
class StatementResult(_Frames):
    """The outcome of one ``INSERT ... WHERE is_not_dup(...)``; as a table, one row per producer."""

    topic: str
    statement_id: str
    producers: Sequence[ProducerCount] = field(default_factory=list)     # (a statement's: ProducerCounts)
    snapshot_id: int | None = None    # the snapshot the statement took, if one was due (R8)
    rounds: int = 0                   # decision rounds it needed (1 unless batch entries straddled a mark)
    commit: int | None = None         # the topic commit that wrote its entries (their ``_commit``); None: the
                                      # statement had no entries, and published no commit
    conflicts: int = 0                # times another driver published the commit number first: decided again
    compaction: object = None         # the topic's compaction, when its commit was one to compact after
                                      # (seqdedup.core.compaction.Compaction; compact_every_commits)
    ledger: Callable[[str], object] | None = field(default=None, repr=False, compare=False)
                                      # statement id -> its ledger rows, as a pyarrow Table (``dropped``)

    @property
    def dropped(self):
        """The ledger rows of the entries this statement dropped (R16), one per entry, with its reason, as a pandas
        DataFrame; empty where the topic keeps no ledger (``dropped_entries`` counts or nothing). A composite id
        (R19) is a tuple in ``composite_id``, as ``Session.dropped`` gives it."""
        if self.ledger is None:
            raise SeqdedupError("this result was not made by a session, so it cannot read the ledger: query "
                                "seqdedup_dropped for its statement_id")
        frame = self.ledger(self.statement_id).to_pandas()
        if "composite_id" in frame.columns:
            frame["composite_id"] = frame["composite_id"].map(ids.decoded, na_action="ignore")
        return frame

    @property
    def written(self) -> int:
        return _total(self.producers, "written")

    @property
    def duplicates(self) -> int:
        return _total(self.producers, "duplicates")

    @property
    def out_of_order(self) -> int:
        """Duplicates that were no repeat: ids that arrived after a higher id (see ``ProducerCount``)."""
        return _total(self.producers, "out_of_order")

    @property
    def payload_conflicts(self) -> int:
        """Duplicates whose payload differs from the one the topic holds for their id (R18)."""
        return _total(self.producers, "payload_conflicts")

    def by_producer(self) -> dict[str, ProducerCount]:
        return {p.producer: p for p in self.producers}

    def to_dict(self) -> dict:
        as_dict = asdict(replace(self, ledger=None, producers=list(self.producers)))
        del as_dict["ledger"]
        return {**as_dict, "written": self.written, "duplicates": self.duplicates}

    def columns_and_rows(self) -> tuple[list[str], list[tuple]]:
        return [f.name for f in fields(ProducerCount)], [tuple(asdict(p).values()) for p in self.producers]


@dataclass
class QueryResult(_Frames):
    """Rows of a query (or nothing, for a statement that returns none)."""

    columns: list[str]
    rows: list[tuple]

    def to_dict(self) -> dict:
        return {"columns": self.columns, "rows": [list(r) for r in self.rows]}

    def columns_and_rows(self) -> tuple[list[str], list[tuple]]:
        return self.columns, self.rows


@dataclass
class Done:
    """A statement that changed the catalog (topic created, policy set) and returns no rows."""

    message: str

    def to_dict(self) -> dict:
        return {"message": self.message}
