"""Kafka record batches as a broker stores them, each written once: the producer id, epoch and sequence that a
consumed record lacks come from the batch headers of a partition's log (examples/kafka_record_batches.py, and the
Kafka guide's snippet that does the same), on every engine."""
from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

import seqdedup

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = runpy.run_path(str(ROOT / "examples" / "kafka_record_batches.py"))


def test_a_logs_batches_are_written_once_with_their_producers_ids(dedup):
    log = EXAMPLE["demo_log"]()
    first = EXAMPLE["ingest"](dedup.session, "events", log)
    assert (first.written, first.duplicates, first.fenced) == (4, 0, 0)
    assert dedup.entries() == [("KOP-PID-PREFIX-7-0", 0, 2), ("KOP-PID-PREFIX-7-0", 3, 4), ("KOP-PID-PREFIX-7-1", 0, 0),
                               ("KOP-PID-PREFIX-8-0", 0, 1)]
    assert dedup.session.sql("SELECT records, kafka_offset FROM events ORDER BY kafka_offset").rows == [
        (["a", "b", "c"], 0), (["d", "e"], 3), (["f"], 5), (["g", "h"], 6)]
    again = EXAMPLE["ingest"](dedup.session, "events", log)      # the log read again, as after a crash
    assert (again.written, again.duplicates, again.fenced) == (0, 2, 2)
    assert len(dedup.entries()) == 4


def test_a_batch_without_a_producer_id_is_refused_naming_why():
    from kafka.record import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)     # no idempotence
    builder.append(timestamp=0, key=None, value=b"x", headers=[])
    builder.close()
    with pytest.raises(ValueError, match="a producer without idempotence .*no producer id and sequence"):
        EXAMPLE["batch_rows"](bytes(builder.buffer()))


def test_the_example_and_the_guides_snippet_run_as_written(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["kafka_record_batches.py", "--database", "kafka.duckdb"])
    for _ in range(2):         # run twice, as a copy job reading its log again
        runpy.run_path(str(ROOT / "examples" / "kafka_record_batches.py"), run_name="__main__")
    printed = capsys.readouterr().out.splitlines()
    assert [line.rsplit(": ", 1)[1] for line in printed] == ["written"] * 4 + ["INVALID_PRODUCER_EPOCH"] * 2 + [
        "duplicate"] * 2
    assert printed[0] == "demo.log: producer 7 epoch 0 sequences 0..2: written"

    guide = (ROOT / "docs" / "guides" / "kafka.md").read_text()
    snippet = next(block for block in re.findall(r"```python\n(.*?)```", re.sub(r"\n  ", "\n", guide), re.S)
                   if "MemoryRecords" in block)
    Path("00000000000000000000.log").write_bytes(EXAMPLE["demo_log"]())
    with seqdedup.connect("guide.duckdb") as session:
        exec(compile(snippet, "docs/guides/kafka.md", "exec"), {"session": session})
        assert session.sql("SELECT count(*) FROM events_p0").rows == [(4,)]
