-- snapshot_headers(topic): one row per snapshot id the topic's rows carry, in Spark SQL, with what the visible rows
-- of that id say: the header's fields, how many header rows (producer NULL) are visible, and how many producer rows.
-- Rows of a commit that was never published are not visible (:visible, on commit_id); their ids still count for
-- the id the next snapshot takes, so that the rows of one snapshot id always belong to one snapshot.
-- catalog.state.complete_snapshots keeps the complete snapshots (a header, and every producer row it counts: a
-- torn snapshot is never used, rule R7), newest first; catalog.state.chain_of picks the snapshots the state is made
-- of. One read of the table and one aggregate: on Spark, a job per read is most of what a small query costs.
-- Two headers can share an id: drivers that create a topic at once each publish its first snapshot, id 1, empty.
-- The lowest of their values is taken: a replay from there starts no later than either would.
-- Placeholders: :topic, :producer_sequences, :visible.
SELECT snapshot_id,
       min(CASE WHEN header THEN position END) AS position,
       min(CASE WHEN header THEN kind END) AS kind,
       min(CASE WHEN header THEN taken_at END) AS taken_at,
       min(CASE WHEN header THEN commit_id END) AS commit_id,
       min(CASE WHEN header THEN parent_id END) AS parent_id,
       min(CASE WHEN header THEN producers END) AS producers,
       count(CASE WHEN header THEN 1 END) AS headers,
       count(CASE WHEN NOT header THEN 1 END) AS producer_rows
FROM (
  -- header: true on a visible header row, false on a visible producer row, NULL on a row that is not visible
  SELECT snapshot_id, position, kind, taken_at, commit_id, parent_id, producers,
         CASE WHEN :visible THEN producer IS NULL END AS header
  FROM :producer_sequences
  WHERE topic = :topic
) AS snapshot_rows
GROUP BY snapshot_id
