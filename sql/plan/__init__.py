"""The plan of an ``INSERT ... WHERE is_not_dup(...)``: every step as a pure tree builder, no engine calls; a module
per plan (``window``, ``rows``, ``exceptions``, with the decision ``rounds`` the last two share), what they share
(``common``) and the plan described as named steps (``describe``).

A statement arrives split by ``sql.rewrite.expand_is_not_dup`` into ``keys`` (each entry's producer, lowest and highest
id, and its ORDER BY values) and ``values`` (the same rows with the values to write). The producers' marks come from
memory (``seqdedup.core.topic_state``), as a small relation ``marks(producer, sequence_id)``. Three plans decide the
same thing (R1, R2) at different costs:

**The window plan** (one pass; Spark's, and DuckDB's where deduplication is disabled, R10: no marks, every valid
entry written): ``values`` joined to the marks, distributed by producer, sorted in arrival
order, decided by running windows, numbered, written. Running aggregates in the same sort give the per-producer
counts at each producer's last row, so the statement reads its source once and runs one job::

    values ⋈ marks ─► distribute by producer ─► window: decide, count ─► position ─► write accepted
                                                                         └─► per-producer counts (last rows)

A producer with more than a task's share of a large unordered statement (a backfill, a CDC stream from one source)
is spread over ranges of its ids (``spread``): the rows are distributed by range, each range decided in any task; a
batch entry that reaches past its range's end is copied into the ranges it reaches (never written nor counted), so
each range starts from what the ranges before it carry in, with one read of the rows; the producer's counts are
summed over its ranges by the runner::

    values ⋈ marks ─► ranges (a copy where a batch entry reaches on) ─► distribute by range ─► window: decide, … ─► …

A statement of keys (R20, ``is_new``), whose outcome is reported as one row (``together``), is decided the other way
round (``key_decisions``): a key's entries all have the id 0, so which copy is first does not depend on the mark.
Its copies are numbered and positioned in the window's sort, and the marks are joined after, to rows already in that
order, so Spark sorts the rows once where joining first sorted them for the join and again for the window. Each row
counts itself; the outcome sums them::

    values ─► distribute by key ─► window: number each key's copies ─► position ─► ⋈ marks ─► decide ─► write …

A batch entry that straddles the mark is left undecided by one pass (``ACCEPTED`` NULL); the statement then runs
the exceptions plan, where only the producers that straddle pay for more rounds.

**The row plan** (DuckDB's: its tables number their rows): ``values`` read once into a table beside each row's mark
(an invalid entry, R4, fails that query as its row is read); the repeats (no ORDER BY, no batch entries: a hash
aggregate) or the candidates the windowed decision rejects (one round without batch entries, so only the rejected
are kept) are removed from it; the outcome is one aggregate of what is left, read before the write; every candidate
left is written, at ``base`` plus its row's place in the table. A small statement without batch entries (without
ORDER BY, before its repeats are looked for; with it, once the window rejected none) writes its candidates first
instead, each at ``base`` plus its place among them, and the write returns their keys (a few rows cost less than
two grouped aggregates); the runner works out the outcome from them in NumPy (with the rows' keys read back where a
row was not written). Where an id repeats among them, the write is undone and the repeats are removed as above::

    values ⋈ marks ─► rows (read once) ─► repeats / rejected removed ─► outcome ─► write candidates
                                     └─► (small) write candidates, keys returned ─► outcome (NumPy)

Where the topic keeps a ledger of dropped entries (R16, ``ledger``), the row plan writes a row per entry it removes,
with its reason, just before removing them; a plan without numbered rows (Spark's) reads the statement's rows once
and writes those rows less the rows its commit wrote (EXCEPT ALL), after its write.

**The exceptions plan** (narrow decision, then one filtered write; Spark's for a straddle): the statement's rows are
read once into a table (``values``: a source read again may give other rows, such as a sample, ``rand()`` or a file
replaced meanwhile, and the plan reads its rows several times). The decision runs on the keys alone, and what it finds
is almost always small: the entries the simple rule "above the mark" gets wrong (repeats inside the statement, entries
that arrived after a higher id). The write is then a filtered copy of ``values``::

    SELECT ─► values (read once)
    keys ⋈ marks ─► producers (per producer: counts, id range, positions reserved)
    keys ─► exceptions: repeated keys (no ORDER BY, no batch entries: a hash aggregate)
                        or the keys the windowed decision rejects or must write once (otherwise)
    values ─► candidates not in exceptions ∪ one row per repeated key ─► positions ─► write

A composite id (R19) is in the engine's working form inside every plan (``catalog.ids``: DuckDB's ``UHUGEINT`` of one
or two parts, the stored text elsewhere): each plan puts the marks in it once per producer and spells the text where
an id leaves it (the write, the dropped entries, the outcome's highest id).

Positions (R7 position: unique, increasing in commit order, not dense). The window plan numbers rows in parallel:
row ``r`` of partition ``i`` of ``n`` gets ``base + r * n + i + 1``, with no global sort. The exceptions plan gives
each producer a range after ``base`` as wide as its ids (``s - smallest + 1``), or as its entries when its ids are
too sparse for that, so an entry's position follows from its own id.
"""
from __future__ import annotations

from .common import (ACCEPTED, DROPPED_ENTRY, INVALID, LAST, MAX_ID, OUTCOME, POSITION, REFUSED, UNSEEN, carried_producers,
                     insert_rows, invalid, refusal)
from .describe import PLANS, describe
from .exceptions import (candidates, decided_counts, decided_exceptions, kept_once, outcome, producer_sums, producers,
                         repeat_counts, repeats, write_rows)
from .rounds import count_rows, decision_round, first_round, round_steps, rows_of, undecided_producers
from .steps import CARRIED, Inputs, Step
from .rows import (CANDIDATE, FIRST, FIRST_ROW, LATE, ROW, drop_rejected, drop_repeats, dropped_rejected,
                   dropped_repeats, late_ids, rejected_only, row_candidates, row_outcome, row_repeats, rows_fetched,
                   rows_once, rows_summary, rows_written)
from .window import marks_lookup, window_decisions, window_metrics, window_outcome
from . import conflicts, gaps, ledger, spread, window

__all__ = ["ACCEPTED", "CANDIDATE", "CARRIED", "DROPPED_ENTRY", "FIRST", "FIRST_ROW", "INVALID", "Inputs", "LAST",
           "LATE", "MAX_ID", "OUTCOME", "PLANS", "POSITION", "REFUSED", "ROW", "Step", "UNSEEN", "candidates",
           "carried_producers", "conflicts", "count_rows", "decided_counts", "decided_exceptions", "decision_round",
           "describe", "drop_rejected", "drop_repeats", "dropped_rejected", "dropped_repeats", "first_round", "gaps",
           "insert_rows", "invalid", "kept_once", "late_ids", "ledger", "marks_lookup", "outcome", "producer_sums",
           "producers", "refusal", "rejected_only", "repeat_counts", "repeats", "round_steps", "row_candidates",
           "row_outcome", "row_repeats", "rows_fetched", "rows_of", "rows_once", "rows_summary", "rows_written",
           "spread", "undecided_producers", "window", "window_decisions", "window_metrics", "window_outcome",
           "write_rows"]
