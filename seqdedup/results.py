"""What seqdedup returns: statement results with per-producer counts (R5), query rows, and state."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class ProducerCount:
    producer: str
    written: int                  # entries written to the topic
    duplicates: int               # entries dropped as duplicates (not an error: R5)
    first_position: int | None    # the lowest and highest position written, or None when nothing was
    last_position: int | None


@dataclass
class StatementResult:
    """The outcome of one ``INSERT ... WHERE is_not_dup(...)``."""

    topic: str
    statement_id: str
    producers: list[ProducerCount] = field(default_factory=list)
    snapshot_id: int | None = None    # the snapshot the statement took, if one was due (R8)
    rounds: int = 0                   # decision rounds it needed (1 unless batch entries straddled a mark)
    commit: int | None = None         # the topic commit that wrote its entries (their ``_commit``)

    @property
    def written(self) -> int:
        return sum(p.written for p in self.producers)

    @property
    def duplicates(self) -> int:
        return sum(p.duplicates for p in self.producers)

    def by_producer(self) -> dict[str, ProducerCount]:
        return {p.producer: p for p in self.producers}

    def to_dict(self) -> dict:
        return {**asdict(self), "written": self.written, "duplicates": self.duplicates}


@dataclass
class QueryResult:
    """Rows of a query (or nothing, for a statement that returns none)."""

    columns: list[str]
    rows: list[tuple]

    def to_dict(self) -> dict:
        return {"columns": self.columns, "rows": [list(r) for r in self.rows]}


@dataclass
class Done:
    """A statement that changed the catalog (topic created, policy set) and returns no rows."""

    message: str

    def to_dict(self) -> dict:
        return {"message": self.message}
