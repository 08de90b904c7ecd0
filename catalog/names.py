"""The names seqdedup gives to what it adds beside a user's data, spelled once for every layer.

- ``SYSTEM``: the columns every topic has after the user's own (their types: ``catalog.schema.SYSTEM_COLUMNS``).
- ``RESERVED``: the prefix of every column a statement's plan or a client adds while it works; a user column may not
  start with it, so the two cannot collide. The columns below, and the plan's own (``sql.plan``), carry it.
- ``STAGING`` and ``SCRATCH``: the folders Spark's storage keeps beside the data (a leading ``_`` hides a folder from
  Spark's and Hive's file listings).

The lowest layer that needs a name imports it from here (catalog, sql, extensions and the clients alike), rather
than from the module of whoever used it first.
"""
from __future__ import annotations

#: The system columns of a topic, after the user's own, in the order a statement writes them.
SYSTEM = (
    "_producer",              # the producer name
    "_sequence_id",           # the entry's (lowest) sequence id
    "_highest_sequence_id",   # max(highest_sequence_id, sequence_id): equal to _sequence_id for a single message
    "_position",              # the message id: unique, increasing in commit order, from 1; not dense
    "_publish_time",          # when the statement that wrote the entry ran
    "_commit",                # the topic commit that wrote the entry: 1, 2, 3 ... (last: Spark partitions by it)
)

RESERVED = "__sd_"
#: An entry's keys as a statement's plan and the clients carry them: its producer, lowest and highest id.
PRODUCER, SEQUENCE_ID, HIGHEST = f"{RESERVED}producer", f"{RESERVED}sequence_id", f"{RESERVED}highest"
#: The column that numbers loaded rows (a producer's messages) in their arrival order, from 0.
ARRIVAL = f"{RESERVED}arrival"

#: Where a topic's commits are staged, under the table's directory (Spark).
STAGING = "_seqdedup_commits"
#: Where temporary tables are written, under the warehouse (Spark).
SCRATCH = "_seqdedup_scratch"
