"""A damaged catalog: a table dropped, a column dropped or of another type, the version row missing, a catalog of a
newer seqdedup, a topic whose table is gone or has a system column of another type. Each is refused with a
CatalogError that says what is wrong and how to fix it, before anything is written; the rest of the data is
untouched, and once the fix the error names is applied (the table restored from a backup) the database works again
and a retry writes each entry once.

A damage is made the way it happens, by statements run on the engine outside seqdedup, on real files: the table
renamed away (to the backup its restore comes from), as DROP TABLE would leave the catalog, or replaced by a table
of another shape. A catalog whose creation was cut short (on Spark, a process killed
during its first connect, after the catalog tables and before the version row) is not damage: the next writable
connect finishes it.
"""
from __future__ import annotations

import pytest
from sqlglot import exp

from seqdedup.catalog.schema import CATALOG_TABLES, CATALOG_VERSION, SYSTEM_COLUMNS, catalog_table, create_table
from seqdedup.catalog.state import literal
from seqdedup.errors import CatalogError

from .helpers import dump


def drop(adapter, table: str | exp.Table) -> None:
    table = exp.table_(table) if isinstance(table, str) else table
    adapter.execute(exp.Drop(tables=[table], kind="TABLE", exists=True))


def rename(adapter, name: str, to: str) -> None:
    adapter.execute(exp.Alter(this=exp.table_(name), kind="TABLE", actions=[exp.AlterRename(this=exp.table_(to))]))


def create(adapter, name: str, columns: dict[str, exp.DataType], *values: tuple[str, ...]) -> None:
    """The catalog table ``name`` created with ``columns``, holding ``values``."""
    adapter.execute(create_table(catalog_table(name), columns, exists=False))
    for row in values:
        adapter.execute(exp.insert(exp.select(*map(literal, row)), catalog_table(name)))


def without(name: str, column: str) -> dict[str, exp.DataType]:
    return {c: kind for c, kind in CATALOG_TABLES[name].items() if c != column}


def retyped(name: str, column: str, kind: str) -> dict[str, exp.DataType]:
    return {c: exp.DataType.build(kind) if c == column else t for c, t in CATALOG_TABLES[name].items()}


def retyped_system(column: str) -> dict[str, exp.DataType]:
    return {c: exp.DataType.build("text") if c == column else t for c, t in SYSTEM_COLUMNS.items()}


RESTORE = "restore it from a backup of this database"

#: damage -> (the table it damages, what takes its place (None: nothing), what the error says is wrong, the fix
#: it names). The table itself is set aside first (renamed): the backup its restore comes from.
DAMAGES = {
    "producer_sequences_dropped": (
        "producer_sequences", None, "the catalog table producer_sequences is missing", RESTORE),
    "a_column_dropped": (
        "producer_sequences", lambda a: create(a, "producer_sequences", without("producer_sequences", "kind")),
        "the catalog table producer_sequences is damaged: it lacks the column kind", RESTORE),
    "a_column_of_another_type": (
        "producer_sequences",
        lambda a: create(a, "producer_sequences", retyped("producer_sequences", "sequence_id", "text")),
        "the catalog table producer_sequences is damaged: its column sequence_id has the type", RESTORE),
    "the_version_row_missing": (
        "seqdedup_meta", lambda a: create(a, "seqdedup_meta", CATALOG_TABLES["seqdedup_meta"]),
        "the seqdedup catalog has no catalog_version row in seqdedup_meta, though its other tables hold rows",
        "Restore seqdedup_meta from a backup"),
    "a_newer_catalog_version": (
        "seqdedup_meta", lambda a: create(a, "seqdedup_meta", CATALOG_TABLES["seqdedup_meta"],
                                          ("catalog_version", str(CATALOG_VERSION + 1))),
        f"this catalog was written by a newer seqdedup \\(catalog version {CATALOG_VERSION + 1}",
        "upgrade seqdedup to use it"),
}


def test_a_damaged_catalog_is_refused_before_anything_is_written(dedup):
    """Each damage in turn, on one database: refused, nothing written, then undone by the fix the error names."""
    dedup.topic(snapshot_interval_entries=2)
    dedup.send([("p", 0), ("p", 1), ("q", 7)])
    before = dump(dedup.session)
    adapter = dedup.session.adapter          # the engine, through a session opened before any damage
    for damage, (table, replacement, wrong, fix) in DAMAGES.items():
        rename(adapter, table, "backup")
        if replacement:
            replacement(adapter)
        damaged = dump(dedup.session).get(table)

        with pytest.raises(CatalogError, match=wrong) as refused:
            dedup.connect()
        assert fix in str(refused.value), f"{damage}: {refused.value}"
        after = dump(dedup.session)          # nothing written: the damaged table as damaged, the rest as before
        assert after.get(table) == damaged, f"{damage}: the refused connect wrote into {table}"
        assert {t: r for t, r in after.items() if t != table} == {t: r for t, r in before.items() if t != table}

        drop(adapter, table)                 # the fix the error names: restore the table from the backup
        rename(adapter, "backup", table)

    dedup.restart()                          # opened again, the database holds all it held, and works
    assert dump(dedup.session) == before
    assert (dedup.last("p"), dedup.last("q")) == (1, 7)
    assert dedup.send([("p", 1), ("p", 2), ("q", 7)]).written == 1
    assert dedup.entries() == [("p", 0, 0), ("p", 1, 1), ("q", 7, 7), ("p", 2, 2)]


def test_a_topic_whose_table_is_gone_or_damaged_is_refused_and_the_others_still_work(dedup):
    for topic in ("gone", "damaged", "other"):
        dedup.topic(topic)
    dedup.send([("p", 0)], topic="other")
    adapter = dedup.session.adapter
    drop(adapter, dedup.session.ref("gone").table)
    damaged = dedup.session.ref("damaged").table
    drop(adapter, damaged)                   # replaced by a table whose sequence ids are strings
    adapter.execute(create_table(damaged, {"payload": exp.DataType.build("text"), **retyped_system("_sequence_id")},
                                 exists=False))
    dedup.restart()                          # the catalog itself is whole: the session opens
    before = dump(dedup.session, topics=("other",))

    problems = {"gone": "topic .*gone is registered but its table is missing",
                "damaged": "the table of topic .*damaged is damaged: its column _sequence_id has the type"}
    for topic, wrong in problems.items():
        writes = {"insert": lambda: dedup.send([("p", 2)], topic=topic),
                  "alter": lambda: dedup.session.alter_topic(topic, snapshot_interval_entries=5),
                  "snapshot": lambda: dedup.session.snapshot(topic),
                  "read": lambda: dedup.session.last_sequence_id(topic, "p")}
        for what, write in writes.items():
            with pytest.raises(CatalogError, match=wrong) as refused:
                write()
            assert "restore the table from a backup of this database" in str(refused.value), (topic, what)
    assert dump(dedup.session, topics=("other",)) == before

    assert dedup.send([("p", 0), ("p", 1)], topic="other").written == 1
    assert dedup.ids("p", topic="other") == [0, 1]


def test_an_unfinished_catalog_creation_is_finished_by_the_next_writable_connect(dedup):
    # What a process killed during its very first connect leaves on Spark: every catalog table created (each
    # CREATE is its own metastore operation), the version row not yet written, no topic.
    adapter = dedup.session.adapter
    drop(adapter, "seqdedup_meta")
    create(adapter, "seqdedup_meta", CATALOG_TABLES["seqdedup_meta"])
    drop(adapter, "seqdedup_consumers")      # the last table: its CREATE was not reached either
    dedup.session.close()

    with pytest.raises(CatalogError, match="the seqdedup catalog was never finished") as refused:
        dedup.connect(read_only=True)        # a reader cannot finish it, and says who can
    assert "connect once without read_only=True to finish it" in str(refused.value)

    dedup.session = dedup.connect()          # a writer finishes it
    assert dedup.session.sql("SELECT key, value FROM seqdedup_meta").rows == [("catalog_version",
                                                                              str(CATALOG_VERSION))]
    assert dedup.session.adapter.columns(catalog_table("seqdedup_consumers"))
    dedup.topic()
    assert dedup.send([("p", 0), ("p", 1), ("p", 1)]).written == 2
    dedup.restart()
    assert dedup.last("p") == 1
