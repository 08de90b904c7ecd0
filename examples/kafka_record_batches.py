"""Kafka record batches into a topic, each once, and where their producer id, epoch and sequence come from.

    python examples/kafka_record_batches.py [SEGMENT ...] --database PATH [--engine duckdb|spark] [--topic T]

A Kafka consumer's records do not carry the producer id, epoch or sequence number of the idempotent producer that
sent them: those are fields of the record batch that holds them (Kafka's v2 format, 0.11 and later), which consumer
clients unpack and drop. A reader of the batches themselves has them. A partition's log segments (the files
``<topic>-<partition>/<offset>.log`` on a broker, or their copies in tiered storage) and the records of a fetch
response are record batches back to back, and kafka-python's ``MemoryRecords`` parses them: each batch says its
``producer_id``, ``producer_epoch``, ``base_sequence`` and ``last_sequence``, and holds the records.

Each SEGMENT's batches become rows for ``session.kafka_ingest`` (one row per batch: a batch is one entry, R2), in
log order, into topic T (columns ``records ARRAY<STRING>``, the batch's record values, and ``kafka_offset BIGINT``,
its first offset; created if absent). The segments must be of one Kafka partition, in order: a producer's sequence
numbers count per partition, so another partition's batches need a topic of their own. It prints the answer to each
batch. Without a SEGMENT it writes one first, ``demo.log``, as a broker stores what idempotent producers sent:
producer 7 in epoch 0 (two batches), producer 7 again after a restart (epoch 1), producer 8. Run it twice, as a copy
job that crashed and reads the log again would: the second run writes nothing. Producer 7's batches of epoch 1 and
producer 8's are answered as duplicates; those of epoch 0 are fenced (``INVALID_PRODUCER_EPOCH``), the topic having
seen epoch 1 since.

Batches from a producer without idempotence (no producer id) carry nothing to deduplicate by, and those of a
transactional producer need its commit and abort markers read first (an aborted batch stays in the log): both are
refused by name. Needs kafka-python (``pip install kafka-python``).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import seqdedup

TOPIC_COLUMNS = {"records": "ARRAY<STRING>", "kafka_offset": "BIGINT"}


def batch_rows(log: bytes) -> list[dict]:
    """One row per record batch of ``log`` (record batches back to back: a segment file, a fetch response's
    records), in log order, with the batch header's producer fields that ``kafka_ingest`` needs."""
    from kafka.record import MemoryRecords

    rows = []
    records = MemoryRecords(log)
    while (batch := records.next_batch()) is not None:
        if batch.magic < 2:
            raise ValueError(f"the batch at offset {batch.base_offset} is in Kafka's format v{batch.magic} (before "
                             "0.11), which has no producer ids and sequences to deduplicate by")
        if batch.is_control_batch:          # a transaction's commit or abort marker: no records of its own
            continue
        if batch.is_transactional or batch.producer_id < 0:
            why = ("a transactional producer (read its commit and abort markers first: an aborted batch stays in "
                   "the log)" if batch.is_transactional else
                   "a producer without idempotence (enable.idempotence=true gives it a producer id)")
            raise ValueError(f"the batch at offset {batch.base_offset} was sent by {why}; it carries no producer id "
                             "and sequence to deduplicate by")
        rows.append({"producer_id": batch.producer_id, "producer_epoch": batch.producer_epoch,
                     "base_sequence": batch.base_sequence, "last_sequence": batch.last_sequence,
                     "kafka_offset": batch.base_offset,
                     "records": [record.value.decode("utf-8") for record in batch]})
    return rows


def demo_log() -> bytes:
    """A segment as a broker stores it: batches of idempotent producers, with their producer ids, epochs and first
    sequence numbers, built as kafka-python's producer builds the batches it sends."""
    from kafka.record import MemoryRecordsBuilder

    sent = [(7, 0, 0, ["a", "b", "c"]), (7, 0, 3, ["d", "e"]),    # producer 7: sequences 0..2, then 3..4
            (7, 1, 0, ["f"]),                                      # producer 7 restarted: a new epoch, from 0
            (8, 0, 0, ["g", "h"])]
    log, offset = b"", 0
    for producer_id, epoch, base_sequence, values in sent:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20,
                                       producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)
        for value in values:
            builder.append(timestamp=int(time.time() * 1000), key=None, value=value.encode(), headers=[])
        builder.close()
        batch = bytearray(builder.buffer())
        batch[:8] = offset.to_bytes(8, "big")      # the broker sets the batch's first offset (outside its CRC)
        log += bytes(batch)
        offset += len(values)
    return log


def ingest(session, topic: str, log: bytes):
    """The log's batches written to ``topic``, each once (``kafka_ingest``: epoch fencing, duplicates answered as
    successes); its result."""
    session.create_topic(topic, TOPIC_COLUMNS, if_not_exists=True)
    return session.kafka_ingest(topic, batch_rows(log))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("segments", nargs="*", type=Path, help="Kafka log segment files (default: demo.log, "
                                                              "written first)")
    parser.add_argument("--database", required=True, help="the DuckDB file, or the Spark home with --engine spark")
    parser.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"])
    parser.add_argument("--topic", default="kafka_events")
    args = parser.parse_args(argv)
    if not args.segments:
        Path("demo.log").write_bytes(demo_log())
        args.segments = [Path("demo.log")]
    with seqdedup.connect(args.database, engine=args.engine) as session:
        for segment in args.segments:
            for r in ingest(session, args.topic, segment.read_bytes()).receipts:
                outcome = r.error if r.error != "NONE" else "duplicate" if r.duplicate else "written"
                print(f"{segment.name}: producer {r.producer_id} epoch {r.producer_epoch} sequences "
                      f"{r.base_sequence}..{r.last_sequence}: {outcome}")


if __name__ == "__main__":
    main()
