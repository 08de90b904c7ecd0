"""Ingest files (JSON lines, CSV or Parquet) into a topic through ``is_not_dup``, in statements of a bounded size.

The files (paths, globs) are read once into a staging table numbered in the order given, each file's rows in file
order; each batch is one ``INSERT INTO topic SELECT ... WHERE is_not_dup(...)`` statement, so a crashed ingest is
simply run again: everything already written is dropped as a duplicate. With ``one_commit`` the whole input is one
statement: all of it is written, or none.

When a statement fails after earlier ones committed, the error says exactly what was written before it.

Columns are matched by name: the columns named for the producer, the ids and the order exactly as written, the topic's
own columns whatever their case (the engines spell a table's column names their own way). Neither engine tells two
names apart by case, and each renames or refuses a second one (DuckDB reads ``Producer,producer`` as ``Producer`` and
``producer_1``): a file whose column names repeat, whatever their case, is refused before anything is read, with the
names, so that a column is never taken for another. The names are read from the file itself: a CSV file's header, a
Parquet file's schema, the keys of a JSON lines file's first ``SAMPLE`` lines (the rows the engines infer its columns
from).
"""
from __future__ import annotations

import csv
import glob
import json
import re
import warnings
from collections import defaultdict
from itertools import islice
from pathlib import Path

from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.names import RESERVED
from seqdedup.catalog.schema import SYSTEM_COLUMNS
from seqdedup.errors import SeqdedupError, SeqdedupWarning, TopicError

FORMATS = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
ROW = "__sd_row"
#: The lines of a JSON lines file whose keys are its column names (DuckDB infers a file's columns from as many).
SAMPLE = 20_480


def files(paths: str | list[str]) -> list[str]:
    """The files of ``paths`` in the order given, each glob's matches sorted; an error names a path that matches none.

    Example:
        >>> files([__file__]) == [__file__]
        True
    """
    found: list[str] = []
    for path in [paths] if isinstance(paths, str) else paths:
        matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path] if Path(path).exists() else []
        if not matches:
            raise SeqdedupError(f"no file {path}; give the path (or a glob) of JSON lines, CSV or Parquet files")
        found += [m for m in matches if Path(m).is_file()]
    return found


#: Rows per statement where the caller gives no number (``--batch-rows``).
BATCH_ROWS = 1_000_000


def ingest(session, topic: str, paths: str | list[str], *, producer: str, sequence_id: str | list[str],
           highest_sequence_id: str | None = None, order_by: str | None = None, fmt: str | None = None,
           batch_rows: int = BATCH_ROWS, one_commit: bool = False, progress: bool = False) -> dict:
    inputs = files(paths)
    formats = [fmt or FORMATS.get(Path(path).suffix.lower()) for path in inputs]
    for path, known in zip(inputs, formats):
        if known is None:
            raise SeqdedupError(f"cannot tell the format of {path}; pass --format json, csv or parquet")
    if batch_rows < 1:
        raise SeqdedupError("--batch-rows must be at least 1")
    adapter = session.adapter
    ref = session.ref(topic)
    # The topic's state, recovered alongside the staging below where the engine runs queries at once (on Spark
    # Connect each is a job, mostly waited for): the statements find it in memory, and the topic as it has it (a
    # lookup of the topic of its own would cost a query more).
    recovering = adapter.alongside(lambda: session.state(ref))
    # (a topic of composite ids, R19: a column per part, in order)
    parts = [sequence_id] if isinstance(sequence_id, str) else list(sequence_id)
    named = {column: option for column, option in ((producer, OPTIONS["producer"]),
                                                   *((part, OPTIONS["sequence_id"]) for part in parts),
                                                   (highest_sequence_id, OPTIONS["highest_sequence_id"]),
                                                   (order_by, OPTIONS["order_by"])) if column}
    temps: list[str] = []
    try:
        try:
            for path, known in zip(inputs, formats):     # before anything is read into the engine
                _distinct_names(path, _names(path, known))
            columns = [name for name, _ in adapter.columns(ref.table) if name not in SYSTEM_COLUMNS]
            if not columns:         # no table: the recovery says why
                recovering.result()
            staging, total = _staging(adapter, inputs, formats, named, columns, temps)
        finally:        # (the recovery's error first, as when it ran first: an unknown topic is named)
            target = recovering.result().topic
        call = exp.Anonymous(this="is_not_dup", expressions=_arguments(target, producer, parts, highest_sequence_id))
        order = [exp.column(order_by.lower(), quoted=True)] if order_by else [exp.column(ROW)]
        size = max(total, 1) if one_commit else batch_rows
        bar = _progress(total, progress)
        done = {"topic": target.ref.key, "files": inputs, "rows": total, "written": 0, "duplicates": 0,
                "out_of_order": 0, "statements": 0}
        for start in range(0, total, size):
            select = (
                exp.select(*[exp.column(n.lower(), quoted=True) for n, _ in target.user_columns])
                .from_(staging.copy())
                .where(exp.and_(call.copy(), exp.column(ROW).between(start + 1, start + size)))
                .order_by(*order)
            )
            insert = exp.insert(select, target.ref.table,
                                columns=[exp.to_identifier(n, quoted=True) for n, _ in target.user_columns])
            try:
                result = session.run(insert)
            except SeqdedupError as error:
                raise _stopped(error, done, start, min(start + size, total), -(-total // size)) from error
            done["written"] += result.written
            done["duplicates"] += result.duplicates
            done["out_of_order"] += result.out_of_order
            done["statements"] += 1
            bar.update(min(size, total - start))
        bar.close()
        if done["out_of_order"]:
            done["warning"] = (
                f"{done['out_of_order']} entries were dropped because they came after a higher sequence id of their "
                f"producer in the input's order ({'--order-by ' + order_by if order_by else 'the order of the lines'}"
                "), not because they were sent twice: seqdedup keeps Pulsar's rule that arrival order decides. If "
                "the input is not in each producer's id order, sort it, or pass --order-by with the column that "
                "gives the order in which entries were sent")
            warnings.warn(done["warning"], SeqdedupWarning, stacklevel=2)
        return done
    finally:
        for name in temps:
            adapter.drop_temp_table(name)


def _arguments(target, producer: str, parts: list[str], highest: str | None) -> list[exp.Expression]:
    """``is_not_dup``'s arguments: the producer's column, the id's (a tuple of them for composite ids, R19), the
    highest id's; refused where the topic's ids have another number of parts than columns are given."""
    if (target.id_parts or 1) != len(parts):
        raise TopicError(f"topic {target.ref.key} has {ids.shape(target.id_parts)}, and {len(parts)} "
                         "--sequence-column were given; give one for each part of an id, in order (--sequence-column "
                         "lsn --sequence-column index for two). Nothing was written")
    if highest and len(parts) > 1:
        raise TopicError("--highest-column is for batch entries of integer ids; composite ids (R19) have none. "
                         "Nothing was written")
    columns = [exp.column(part.lower(), quoted=True) for part in parts]
    return [exp.column(producer.lower(), quoted=True),
            columns[0] if len(columns) == 1 else exp.Tuple(expressions=columns),
            *([exp.column(highest.lower(), quoted=True)] if highest else [])]


class _Pairs(list):
    """A JSON object's (key, value) pairs, as read: a key twice in one object is there twice."""


def _names(path: str, fmt: str) -> list[str]:
    """The column names of a file as it writes them: a CSV file's header (its delimiter sniffed), a Parquet file's
    schema, the keys of the objects on a JSON lines file's first ``SAMPLE`` lines (each once, but one twice in an
    object)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as file:
        if fmt == "csv":
            sample = file.read(1 << 16)
            try:
                dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
            except csv.Error:
                dialect = csv.excel
            return next(csv.reader(sample.splitlines(), dialect), [])
        names: dict[str, None] = {}
        twice: list[str] = []
        for line in islice(file, SAMPLE):
            try:
                pairs = json.loads(line, object_pairs_hook=_Pairs)
            except ValueError:
                continue            # the engine says what is wrong with the line
            keys = [key for key, _ in pairs] if isinstance(pairs, _Pairs) else []
            twice += [key for key in dict.fromkeys(keys) if keys.count(key) > 1 and key not in twice]
            names.update(dict.fromkeys(keys))
        return [*names, *twice]


def _distinct_names(path: str, names: list[str]) -> None:
    """Refuse a file with two columns whose names are the same, whatever their case: neither engine tells them
    apart, and each renames or refuses one, so a column could be taken for another."""
    spellings: dict[str, list[str]] = defaultdict(list)
    for name in names:
        spellings[name.lower()].append(name)
    clashes = [" and ".join(repr(name) for name in same) for same in spellings.values() if len(same) > 1]
    if clashes:
        raise TopicError(f"{path} has columns whose names are the same whatever their case ({'; '.join(clashes)}): "
                         "DuckDB and Spark read column names without regard to case, so seqdedup cannot tell which one "
                         "is meant. Rename one of each in the file: column names must differ in more than case. "
                         "Nothing was written")


def _column(path: str, names: list[str], name: str, option: str | None) -> str:
    """The file's column for ``name``: as written for a column the user ``option`` named, whatever its case for one
    of the topic's (``option`` None)."""
    if option is not None and name in names:
        return name
    alike = [n for n in names if n.lower() == name.lower()]
    if option is None and len(alike) == 1:
        return alike[0]
    hint = (f" (names are matched exactly, case included: pass {option} {alike[0]} for its column {alike[0]!r})"
            if alike and option else "")
    raise TopicError(f"{path} has no column {name!r}{hint}; its columns are {sorted(names)}")


#: How the command line names the columns ``ingest`` is told (in errors).
OPTIONS = {"producer": "--producer-column", "sequence_id": "--sequence-column",
           "highest_sequence_id": "--highest-column", "order_by": "--order-by"}


def _staging(adapter, inputs: list[str], formats: list[str], named: dict[str, str], columns: list[str],
             temps: list[str]) -> tuple[exp.Table, int]:
    """One table of the columns ``named`` (producer, ids, order: matched exactly; each with the option that named
    it) and the topic's ``columns``
    (matched whatever their case), each under its name in lower case, of every file, numbered from 1 as ``ROW`` in
    input order; and its number of rows (the files' counts, each read once: ``temp_table_rows``)."""
    parts, offset = [], 0
    for i, (path, fmt) in enumerate(zip(inputs, formats)):
        name = f"__sd_ingest_{i}"
        temps.append(name)
        rows = adapter.file_rows(path, fmt, ROW)
        # the file's own columns, read before numbering its rows (a column named like ours would clash with it)
        names = [column for column, _ in adapter.query_columns(rows.copy().select("*", append=False))]
        reserved = [c for c in names if c.lower().startswith(RESERVED)]
        if reserved:
            raise TopicError(f"{path} has a column named like seqdedup's own ({sorted(reserved)}): names starting "
                             f"with {RESERVED} are reserved; rename the column in the file, or read it through SQL "
                             "with another name (AS ...)")
        _distinct_names(path, names)       # (as the engine read them: a key past the sample of a JSON file)
        # each under its name in lower case (one file column, since none differ only in case)
        chosen = {column.lower(): _column(path, names, column, option) for column, option in named.items()}
        chosen.update({column.lower(): _column(path, names, column, None) for column in columns})
        # the file's rows written once, numbered, with the chosen columns under their names
        table = adapter.create_temp_table(name, exp.select(
            *[exp.alias_(exp.column(column, quoted=True), alias, quoted=True) for alias, column in chosen.items()],
            exp.column(ROW)).from_(rows.subquery("f")))
        parts.append(exp.select(*[exp.column(alias, quoted=True) for alias in chosen],
                                exp.alias_(exp.column(ROW) + offset, ROW)).from_(table))
        offset += adapter.temp_table_rows(table)
    if len(parts) == 1:         # one file: its table is the staging table (on Spark each write costs a job)
        return table, offset
    union = parts[0]
    for part in parts[1:]:
        union = exp.union(union, part, distinct=False)
    temps.append("__sd_ingest")
    return adapter.create_temp_table("__sd_ingest", exp.select("*").from_(union.subquery("u"))), offset


def _stopped(error: SeqdedupError, done: dict, start: int, end: int, count: int) -> SeqdedupError:
    """The error of the statement that failed, with what the statements before it wrote (they are committed)."""
    said = re.sub(r"[.;]?\s*Nothing was written\.?$", "", str(error).rstrip())
    where = f"statement {done['statements'] + 1} of {count}, input rows {start + 1} to {end}"
    if not done["statements"]:
        return type(error)(f"{said}. Nothing was written: the ingest stopped at {where}")
    return type(error)(
        f"{said}. The ingest stopped at {where}, which wrote nothing; the {done['statements']} statement(s) before it "
        f"(input rows 1 to {start}) are committed: {done['written']} entries written, {done['duplicates']} dropped "
        "as duplicates. Fix the input and run the ingest again (what was written is dropped as a duplicate), or "
        "ingest with --one-commit to write all of it or nothing")


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    if not enabled:
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, unit="rows", desc="ingest", disable=total < 100_000)
