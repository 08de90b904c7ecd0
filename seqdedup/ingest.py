"""Ingest a file (JSON lines, CSV or Parquet) into a topic through ``is_not_dup``, in statements of a bounded size.

The file is read once into a staging table numbered in file order; each batch is one
``INSERT INTO topic SELECT ... WHERE is_not_dup(...)`` statement, so a crashed ingest is simply run again:
everything already written is dropped as a duplicate.
"""
from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from seqdedup.errors import SeqdedupError, TopicError

FORMATS = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
ROW = "__sd_row"


def ingest(session, topic: str, path: str, *, producer: str, sequence_id: str, highest_sequence_id: str | None = None,
           order_by: str | None = None, fmt: str | None = None, batch_rows: int = 1_000_000,
           progress: bool = False) -> dict:
    file = Path(path)
    if not file.exists():
        raise SeqdedupError(f"no file {path}; give the path of a JSON lines, CSV or Parquet file")
    fmt = fmt or FORMATS.get(file.suffix.lower())
    if fmt is None:
        raise SeqdedupError(f"cannot tell the format of {path}; pass --format json, csv or parquet")
    if batch_rows < 1:
        raise SeqdedupError("--batch-rows must be at least 1")
    adapter = session.adapter
    target = session.topic(topic)
    staging = adapter.create_temp_table("__sd_ingest", adapter.file_rows(str(file), fmt, ROW))
    try:
        present = {name.lower(): name for name, _ in adapter.columns(staging)}
        needed = [producer, sequence_id] + ([highest_sequence_id] if highest_sequence_id else []) + (
            [order_by] if order_by else [])
        missing = [c for c in needed + [n for n, _ in target.user_columns] if c.lower() not in present]
        if missing:
            raise TopicError(f"{path} has no columns {missing}; its columns are {sorted(present.values())}")
        total = adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(staging.copy()))[0][0]
        call = exp.Anonymous(this="is_not_dup", expressions=[exp.column(c, quoted=True) for c in needed[:3 if highest_sequence_id else 2]])
        order = [exp.column(order_by, quoted=True)] if order_by else [exp.column(ROW)]
        bar = _progress(total, progress)
        written = duplicates = statements = 0
        for start in range(0, total, batch_rows):
            select = (
                exp.select(*[exp.column(present[n.lower()], quoted=True) for n, _ in target.user_columns])
                .from_(staging.copy())
                .where(exp.and_(call.copy(), exp.column(ROW).between(start + 1, start + batch_rows)))
                .order_by(*order)
            )
            result = session.run(exp.insert(select, target.ref.table,
                                             columns=[exp.to_identifier(n, quoted=True) for n, _ in target.user_columns]))
            written, duplicates, statements = written + result.written, duplicates + result.duplicates, statements + 1
            bar.update(min(batch_rows, total - start))
        bar.close()
        return {"topic": target.ref.key, "rows": total, "written": written, "duplicates": duplicates,
                "statements": statements}
    finally:
        adapter.drop_temp_table("__sd_ingest")


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
