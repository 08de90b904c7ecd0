"""A plan as a list of named steps. Each step is a name people read and the builder of its tree from the plan's
``Inputs``; the runner (``seqdedup.core.plans``) builds every query it sends from these lists, and ``describe``
renders a whole list (tests/golden holds them per engine), so what a reviewer reads is what runs.

A plan's list is in the order the steps run. Some steps run only on a condition (ORDER BY or batch entries, a large
state, a straddle); their names say when, and the runner picks them by key.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlglot import exp

from .common import carried_producers


@dataclass
class Inputs:
    """What a plan's steps are built from. The runner gives the tables it made (``tables``, by step key) and
    parameters for the values that change from one statement to the next; ``describe`` gives plain names."""

    statement: Any                  # the statement as written (``sql.rewrite.DedupInsert``)
    topic: exp.Table
    targets: list[str]              # the topic's user columns the statement writes
    values: list[str]               # the statement's columns that hold them
    publish_time: exp.Expression
    commit: exp.Expression
    base: exp.Expression            # the position before the statement's first
    marks: exp.Expression | None = field(default_factory=lambda: exp.table_("__sd_marks"))
    partitions: int | None = None   # the window plan's: the engine's partitions (None: one sort)
    number: exp.Expression | None = None    # the engine's row numbering
    checked: bool = True            # deduplication on (off: every valid entry is written)
    seen: bool = False              # the marks are the carried producers' only (a semi-join of a large state)
    gather: bool = False            # a small statement's window plan: the rows in one task
    refuse: exp.Expression | None = None    # what fails the window plan's query at an invalid entry
    ranges: exp.Expression | None = None    # the window plan's ranges of a large producer's entries (``spread``)
    batches: bool = True            # the statement has batch entries (the decision's rounds)
    windowed: bool = True           # the exceptions plan's write numbers rows by window (see ``write_rows``)
    read_once: bool = False         # the plan reads the statement's rows from the table of one reading
    dropped: bool = False           # the row plan sets its dropped entries apart (the ledger, payload conflicts)
    fingerprint: exp.Expression | None = None   # an entry's fingerprint over the plan's row (R18), where judged
    entry: exp.Expression | None = None         # an entry's columns as JSON, where the ledger keeps them
    split: bool = False             # the window plan stages its dropped entries apart, for the ledger (``fates``)
    bare: bool = False              # ... their keys only, their columns NULL (not kept as rows, judged if at all
                                    # from the fingerprints the write stages: ``held``)
    held: exp.Expression | None = None     # ... with their own fingerprints and their written copies' (an entry's
                                           # fingerprint over the decided rows: ``window_decisions``' held)
    together: bool = False          # the outcome of every producer as one row (a statement of keys, R20)
    tables: dict[str, exp.Expression] = field(default_factory=dict)

    def table(self, key: str) -> exp.Expression:
        """The table (or subquery) a step made, by its key; in a description, ``__sd_<key>``."""
        found = self.tables.get(key)
        return found.copy() if found is not None else exp.table_(f"__sd_{key}")

    @property
    def read(self):
        """The statement as the plan reads it: over the table of its rows when they are read once."""
        return self.statement.over(self.table("values")) if self.read_once else self.statement

    def having(self, **tables: exp.Expression) -> "Inputs":
        """The same inputs with more tables made."""
        return dataclasses.replace(self, tables={**self.tables, **tables})


@dataclass(frozen=True)
class Step:
    """One step: ``key`` is the runner's name for it, ``name`` what people read, ``build`` its tree."""

    key: str
    name: str
    build: Callable[[Inputs], exp.Expression]


def plan_of(*steps: Step) -> dict[str, Step]:
    """A plan: its steps by key, in the order they run."""
    return {step.key: step for step in steps}


#: The steps that read the statement itself, shared by the plans.
VALUES = Step("values", "the statement's rows, read once into a table", lambda i: i.statement.values)
CARRIED = Step("carried", "a large state: the producers the statement carries (only their marks are joined)",
               lambda i: carried_producers(i.read.keys))

