-- snapshot_headers(topic): the complete snapshots of a topic, newest first, in Spark SQL. A snapshot is complete
-- when its header row (producer NULL) is there and so are all the producer rows the header counts; a torn snapshot
-- is never used (rule R7), and neither is a row of a commit that was never published (:visible, on commit_id).
-- Each row also carries the id the next snapshot will take: above every id any row has, published or not, so
-- that the rows of one snapshot id always belong to one snapshot. (catalog.state.Chain picks the snapshots the
-- state is made of: the latest full one and the increments that follow it.)
-- Placeholders: :topic, :producer_sequences, :visible.
WITH headers AS (
  SELECT snapshot_id, position, kind, producers, taken_at, commit_id, parent_id
  FROM :producer_sequences
  WHERE topic = :topic AND producer IS NULL AND :visible
), counted AS (
  SELECT snapshot_id, count(*) AS n
  FROM :producer_sequences
  WHERE topic = :topic AND producer IS NOT NULL AND :visible
  GROUP BY snapshot_id
)
SELECT h.snapshot_id, h.position, h.kind, h.taken_at, h.commit_id, h.parent_id, h.producers,
       (SELECT max(snapshot_id) + 1 FROM :producer_sequences WHERE topic = :topic) AS next_snapshot_id
FROM headers AS h LEFT JOIN counted AS c ON c.snapshot_id = h.snapshot_id
WHERE coalesce(c.n, 0) = h.producers
ORDER BY h.snapshot_id DESC
