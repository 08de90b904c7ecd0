"""The clients built on a ``Session``: a ``Producer`` (with its batching and receipts), the consumer and ``Reader``,
Kafka record batches, Spark Structured Streaming's ``foreachBatch``, file ingest and Arrow frames in and out."""
