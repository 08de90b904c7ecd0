"""``ingest`` takes the columns it is told, never another: the columns named for the producer and the ids are matched
exactly, and a file whose column names differ only in case is refused before anything is written (both engines
read names without regard to case: DuckDB renamed the second ``producer`` of ``Producer,producer`` to ``producer_1``,
and ``--producer-column producer`` wrote the first one's values). On every engine."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqdedup.errors import TopicError
from seqdedup.clients.ingest import ingest


def write(path, fmt: str, columns: list[str], rows: list[tuple]) -> str:
    """A file of ``rows`` under the header ``columns`` (names written as given, repeats and case included)."""
    if fmt == "csv":
        path.write_text(",".join(columns) + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows))
    elif fmt == "json":      # the keys as written, in order (a dict would fold repeats)
        path.write_text("".join("{" + ", ".join(f"{json.dumps(c)}: {json.dumps(v)}" for c, v in zip(columns, row))
                                + "}\n" for row in rows))
    else:
        pq.write_table(pa.Table.from_arrays([pa.array([row[i] for row in rows]) for i in range(len(columns))],
                                            names=columns), path)
    return str(path)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_a_file_whose_column_names_differ_only_in_case_is_refused_and_nothing_is_written(dedup, tmp_path, fmt):
    dedup.topic()
    path = write(tmp_path / f"in.{fmt}", fmt, ["Producer", "producer", "seq", "payload"],
                 [("A", "b", 0, "x"), ("A", "b", 1, "y")])
    with pytest.raises(TopicError, match="same whatever their case \\('Producer' and 'producer'\\)") as refused:
        ingest(dedup.session, "events", path, producer="producer", sequence_id="seq")
    assert "Rename one of each in the file" in str(refused.value) and "Nothing was written" in str(refused.value)
    assert dedup.entries() == []


def test_the_columns_named_for_the_producer_and_the_ids_are_matched_exactly(dedup, tmp_path):
    dedup.topic()
    path = write(tmp_path / "in.csv", "csv", ["Producer", "Seq", "payload"], [("A", 0, "x"), ("A", 1, "y")])
    with pytest.raises(TopicError, match="has no column 'producer' \\(names are matched exactly, case included: "
                                         "pass --producer-column Producer for its column 'Producer'\\)"):
        ingest(dedup.session, "events", path, producer="producer", sequence_id="Seq")
    assert dedup.entries() == []
    done = ingest(dedup.session, "events", path, producer="Producer", sequence_id="Seq")   # payload: the topic's
    assert done["written"] == 2 and dedup.entries() == [("A", 0, 0), ("A", 1, 1)]


def test_a_topic_of_composite_ids_takes_a_sequence_column_per_part(dedup, tmp_path):
    # R19: --sequence-column once per part, in order; another number of them is refused before anything is written
    dedup.session.create_topic("changes", {"row": "STRING"}, id_parts=2)
    path = write(tmp_path / "in.json", "json", ["slot", "lsn", "idx", "row"],
                 [("s", 5, 0, "a"), ("s", 5, 1, "b"), ("s", 5, 0, "a"), ("s", 3, 9, "late")])
    with pytest.raises(TopicError, match="has ids of 2 parts, and 1 --sequence-column were given; give one for each"):
        ingest(dedup.session, "changes", path, producer="slot", sequence_id="lsn")
    done = ingest(dedup.session, "changes", path, producer="slot", sequence_id=["lsn", "idx"])
    assert (done["written"], done["duplicates"], done["out_of_order"]) == (2, 2, 1)
    assert dedup.session.last_sequence_id("changes", "s") == (5, 1)
