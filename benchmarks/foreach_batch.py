#!/usr/bin/env python3
"""Target (Spark): a Structured Streaming micro-batch of 1,000 rows written through ``seqdedup.foreach_batch``
costs at most 2x a plain append of the same micro-batch to a table of the same shape.

The sink is called as ``foreachBatch`` calls it, with a DataFrame of 1,000 new entries of 10 producers per batch;
the plain append writes the same DataFrame with ``DataFrame.write.insertInto``. Medians over --batches batches.

    python benchmarks/foreach_batch.py [--batches 30] [--rows 1000]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import Engines, median  # noqa: E402

import seqdedup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rows", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engines = Engines("spark", pathlib.Path(tmp))
        spark, session = engines.spark, engines.fresh()
        session.create_topic("events", {"payload": "STRING"})
        spark.sql("CREATE TABLE plain (payload STRING, producer STRING, seq BIGINT) USING parquet")
        sink = seqdedup.foreach_batch(session, "events", producer="producer", sequence_id="seq")
        session.state("events")
        sink_times, plain_times = [], []
        for batch_id in range(args.batches + 3):
            frame = spark.sql(f"SELECT concat('payload-', id) AS payload, concat('p', id % 10) AS producer, "
                              f"{batch_id * args.rows} + id AS seq FROM range({args.rows})")
            start = time.perf_counter()
            sink(frame, batch_id)
            middle = time.perf_counter()
            frame.write.insertInto("plain")
            end = time.perf_counter()
            if batch_id >= 3:                       # the first batches warm the session up
                sink_times.append(middle - start)
                plain_times.append(end - middle)
        written = session.sql("SELECT count(*) FROM events").rows[0][0]
        ratio = median(sink_times) / median(plain_times)
        print(f"batches={args.batches} rows_per_batch={args.rows} written={written} "
              f"expected={(args.batches + 3) * args.rows}")
        print(f"foreach_batch_s={median(sink_times):.3f} plain_append_s={median(plain_times):.3f}")
        print(f"foreach_batch_over_plain_append={ratio:.2f} target<=2.00 {'MET' if ratio <= 2 else 'NOT MET'}")
        if written != (args.batches + 3) * args.rows:
            sys.exit("the sink wrote the wrong number of entries")


if __name__ == "__main__":
    main()
