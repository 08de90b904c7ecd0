"""Publish a file, one message per line, effectively once: the seed article's file example (PIP 6), runnable.

    python examples/publish_file.py FILE --database PATH [--engine duckdb|spark] [--topic T] [--producer NAME]
                                         [--batch N] [--verbose]

Each line of FILE becomes one entry of topic T (columns ``record STRING, offset BIGINT``, created if absent) under
producer NAME, with the line's byte offset in the file as its explicit sequence id. ``--batch N`` sends N lines per
statement (default 1: record by record). ``--database`` is the DuckDB file, or with ``--engine spark`` the folder of
the local session's warehouse and Hive metastore (as for the ``seqdedup`` command line). It prints a one-line
summary; ``--verbose`` prints a line where it resumes and one per send before it.

Kill it at any moment (``kill -9``) and run it again: the producer asks the topic for its last sequence id, the
file is read from the line after that offset, and anything the killed run had sent again is dropped as a duplicate.
The topic ends up holding every line of the file exactly once.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import seqdedup


def lines(source, start: int):
    """(offset, record) of each line of the binary file ``source`` from byte ``start``; the newline is not kept."""
    source.seek(start)
    offset = start
    for line in source:
        yield offset, line.rstrip(b"\n").decode("utf-8")
        offset += len(line)


def batches(items, size: int):
    """Lists of ``size`` consecutive items (the last one shorter)."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def resume_offset(source, last: int) -> int:
    """The byte offset of the first line not yet published, given the producer's last sequence id.

    The article writes ``if (fileOffset > 0) source.seekToOffset(fileOffset)``: that resumes AT the last published
    record, so it is sent again (a duplicate, harmless but a wasted send), and it cannot tell "nothing was sent"
    from "the record at offset 0 was sent". ``last_sequence_id`` is ``-1`` when the producer has no mark, and
    offset 0 is a real id, so: -1 starts at the beginning, anything else starts after the line at that offset.
    """
    if last < 0:
        return 0
    source.seek(max(last - 1, 0))
    if last > 0 and source.read(1) != b"\n":
        raise SystemExit(f"the producer's last sequence id {last} is not the start of a line of {source.name}: "
                         "was the file changed? Use another --producer (or topic) for another file")
    source.seek(last)
    if not source.readline():
        raise SystemExit(f"the producer's last sequence id {last} is past the end of {source.name}: "
                         "was the file changed? Use another --producer (or topic) for another file")
    return source.tell()


def connect(engine: str, database: str, master: str):
    if engine == "spark":
        from seqdedup.extensions.spark import local_session

        return seqdedup.connect(local_session(database, master=master), engine="spark")
    return seqdedup.connect(database)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--database", "-d", required=True,
                        help="DuckDB: the database file. Spark: the folder of the warehouse and Hive metastore")
    parser.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"])
    parser.add_argument("--master", default="local[2]", help="Spark master URL (with --engine spark)")
    parser.add_argument("--topic", default="records")
    parser.add_argument("--producer", default="publish-file",
                        help="the producer name: keep it across restarts, or the run cannot resume")
    parser.add_argument("--batch", type=int, default=1, help="lines per send (default 1: record by record)")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print a line where it resumes and per send")
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")

    session = connect(args.engine, args.database, args.master)
    session.create_topic(args.topic, {"record": "STRING", "offset": "BIGINT"}, if_not_exists=True)
    # send_timeout=None retries an unsettled send for ever, with the same ids: the article's setSendTimeout(0).
    producer = session.producer(args.topic, name=args.producer, send_timeout=None)
    last = producer.last_sequence_id
    sent = written = 0
    with open(args.file, "rb") as source:
        start = resume_offset(source, last)
        if args.verbose:
            print(f"resuming at byte {start} (last_sequence_id {last})", flush=True)
        for batch in batches(lines(source, start), args.batch):
            receipts = producer.send([(record, offset) for offset, record in batch], sequence_id="offset")
            sent, written = sent + len(batch), written + receipts.written
            if args.verbose:
                print(f"sent the lines at bytes {batch[0][0]}..{batch[-1][0]}: wrote {receipts.written}, "
                      f"dropped {receipts.duplicates}", flush=True)
    print(f"{args.file}: resumed at byte {start} (last_sequence_id was {last}); sent {sent} records, wrote {written}, "
          f"dropped {sent - written} duplicates; topic {producer.topic.ref.key}, producer {producer.name}, "
          f"last_sequence_id {producer.last_sequence_id}")
    producer.close()
    session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
