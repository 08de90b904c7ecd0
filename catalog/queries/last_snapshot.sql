-- last_snapshot(topic): the latest complete snapshot of a topic, in Spark SQL. A snapshot is complete when its
-- header row (producer NULL) is there and so are all the producer rows the header counts; a torn snapshot is
-- never used (rule R7). Also returns the id the next snapshot will take.
-- Placeholders: :topic, :producer_sequences.
WITH headers AS (
  SELECT snapshot_id, position, kind, producers, taken_at
  FROM :producer_sequences
  WHERE topic = :topic AND producer IS NULL
), counted AS (
  SELECT snapshot_id, count(*) AS n
  FROM :producer_sequences
  WHERE topic = :topic AND producer IS NOT NULL
  GROUP BY snapshot_id
)
SELECT h.snapshot_id, h.position, h.kind, h.taken_at,
       (SELECT max(snapshot_id) + 1 FROM headers) AS next_snapshot_id
FROM headers AS h LEFT JOIN counted AS c ON c.snapshot_id = h.snapshot_id
WHERE coalesce(c.n, 0) = h.producers
QUALIFY row_number() OVER (ORDER BY h.snapshot_id DESC) = 1
