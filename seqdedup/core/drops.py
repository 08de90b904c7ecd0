"""What a topic's statements dropped and why, per commit and per producer: the figures of ``seqdedup report``
(the page: seqdedup/report.py), summed by the engine from the run log (R5), the ledger of dropped entries (R16) and
the holes (R17), so that a ledger of millions of rows comes back as a few rows per commit."""
from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from seqdedup.catalog.catalog import TopicRef
from seqdedup.catalog.schema import catalog_table
from seqdedup.catalog.state import literal
from seqdedup.errors import EngineError
from seqdedup.udfs import REASONS, Policies

if TYPE_CHECKING:
    import pyarrow as pa

    from .broker import Broker

#: The commits a report covers at most, the latest: a page of charts, not an export (``seqdedup dropped`` is one).
COMMITS = 1000
#: The producers a report names, those with most drops first, and those of them it draws commit by commit.
PRODUCERS = 20
DRAWN = 6


def catalog_read(executor, name: str, query: exp.Expression) -> pa.Table | None:
    """``query`` of the catalog table ``name``, or None where the catalog has no such table: a read-only session on
    a catalog from before the table, which only a writable session adds (no statement has kept a row in it)."""
    try:
        return executor.fetch_arrow(query)
    except EngineError:
        if executor.columns(catalog_table(name)):
            raise
        return None


@dataclass(frozen=True)
class DropReport:
    """A topic's drops over its latest commits (``since`` on): ``commits``, ``producers`` and
    ``producers_over_commits`` are tables with the columns ``FIGURES`` (and ``commit_id`` with ``executed_at``,
    ``producer``, or both), the most dropping producers first; ``policies``, what the topic keeps now (its ledger,
    its holes). ``seqdedup.report.page`` draws it as a page."""

    topic: str
    since: dt.datetime | None
    policies: Policies
    commits: pa.Table
    producers: pa.Table
    producers_over_commits: pa.Table      # (producer, commit_id, FIGURES) of the first DRAWN producers that dropped

    #: Per commit or producer: written and dropped (the run log), dropped for each reason (the ledger: 0 where it
    #: kept no row), dropped with no ledger row (statements that ran while the topic kept none), the holes (R17) and
    #: the ids they skipped.
    FIGURES = ("written", "dropped", *REASONS, "unexplained", "holes", "skipped_ids")

    def totals(self) -> dict[str, int]:
        return {name: sum(self.commits.column(name).to_pylist()) for name in self.FIGURES}

    def to_dict(self) -> dict:
        """The report as JSON-ready data (the page carries it, for tools and tests)."""
        def rows(table: pa.Table) -> list[dict]:
            return [{k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in row.items()}
                    for row in table.to_pylist()]

        return {"topic": self.topic, "since": self.since.isoformat() if self.since else None,
                "dropped_entries": self.policies.dropped_entries, "gap_policy": self.policies.gap_policy,
                "totals": self.totals(), "commits": rows(self.commits), "producers": rows(self.producers),
                "producers_over_commits": rows(self.producers_over_commits)}


def _sum(expression: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(exp.func("coalesce", exp.func("sum", expression), exp.convert(0)), name)


def _counted(reason: str) -> exp.Expression:
    return exp.case().when(exp.column("reason").eq(literal(reason)), exp.convert(1)).else_(exp.convert(0))


def _narrowed(query: exp.Select, time: str, since: dt.datetime | None, first: int) -> exp.Select:
    query = query.where(exp.column("commit_id") >= exp.convert(first))
    return query.where(exp.column(time) >= literal(since)) if since is not None else query


def gather(broker: Broker, ref: TopicRef, since: dt.datetime | None = None, commits: int = COMMITS) -> DropReport:
    """The report of the topic ``ref``: its latest ``commits`` commits with a run log row, from ``since`` on."""
    import pyarrow as pa        # (here: the command line imports this module, and starts faster without pyarrow)
    import pyarrow.compute as pc

    catalog = broker.reads()
    executor = catalog.executor
    policies = broker.topic(ref).applied
    log = catalog.run_log(ref).subquery("log")
    latest = exp.select("commit_id").from_(log).group_by("commit_id").order_by(
        exp.column("commit_id").desc()).limit(commits)
    if since is not None:
        latest = latest.where(exp.column("executed_at") >= literal(since))
    found = executor.fetchall(exp.select(exp.func("min", exp.column("commit_id"))).from_(latest.subquery("c")))
    first = found[0][0] if found and found[0][0] is not None else 2**62     # (no commit: every table empty)
    sums = {
        "log": (catalog.run_log(ref), "seqdedup_statements", "executed_at",
                [_sum(exp.column("written"), "written"), _sum(exp.column("duplicates"), "dropped"),
                 exp.alias_(exp.func("min", exp.column("executed_at")), "executed_at")]),
        "ledger": (catalog.dropped(ref), "seqdedup_dropped", "dropped_at",
                   [_sum(_counted(reason), reason) for reason in REASONS]),
        "gaps": (catalog.gaps(ref), "seqdedup_gaps", "found_at",
                 [_sum(exp.convert(1), "holes"),
                  _sum(exp.column("before_id") - exp.column("after_id") - exp.convert(1), "skipped_ids")]),
    }

    def summed(*by: str, producers: list[str] | None = None) -> pa.Table:
        """The three sources summed by ``by`` (commit_id, producer, or both), joined on it; only ``producers``'
        rows where given."""
        joined = None
        for name, (source, table, time, figures) in sums.items():
            if "commit_id" not in by and name == "log":
                figures = figures[:2]           # (written, dropped: a time is a commit's, not a producer's)
            query = _narrowed(exp.select(*by, *figures).from_(source.subquery(name)), time, since, first)
            if producers is not None:
                query = query.where(exp.column("producer").isin(*map(literal, producers)) if producers
                                    else exp.false())
            read = catalog_read(executor, table, query.group_by(*by))
            if read is None:        # (a catalog from before the table: none of its figures)
                read = pa.table({**{key: pa.array([], pa.string() if key == "producer" else pa.int64())
                                    for key in by}, **{f.alias: pa.array([], pa.int64()) for f in figures}})
            joined = read if joined is None else joined.join(read, list(by), join_type="full outer")
        zeros = {name: joined.column(name).fill_null(0).cast(pa.int64())
                 for name in DropReport.FIGURES if name != "unexplained"}
        explained = functools.reduce(pc.add, [zeros[reason] for reason in REASONS])
        figures = {**zeros, "unexplained": pc.max_element_wise(pc.subtract(zeros["dropped"], explained), 0)}
        columns = {key: joined.column(key) for key in by}
        if by == ("commit_id",):
            columns["executed_at"] = joined.column("executed_at")
        return pa.table({**columns, **{name: figures[name] for name in DropReport.FIGURES}})

    by_commit = summed("commit_id").sort_by("commit_id")
    by_producer = summed("producer").sort_by([("dropped", "descending"), ("producer", "ascending")])
    by_producer = by_producer.slice(0, PRODUCERS)
    drawn = [p for p, dropped in zip(by_producer.column("producer").to_pylist(),
                                     by_producer.column("dropped").to_pylist()) if dropped][:DRAWN]
    over_commits = summed("producer", "commit_id", producers=drawn).sort_by([("producer", "ascending"),
                                                                            ("commit_id", "ascending")])
    return DropReport(ref.key, since, policies, by_commit, by_producer, over_commits)

__all__ = ["COMMITS", "DropReport", "catalog_read", "gather"]
