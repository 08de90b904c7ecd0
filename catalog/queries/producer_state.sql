-- producer_state(topic): the recovered high-water marks of one topic (rule R7), in Spark SQL.
-- The producer rows of the latest complete snapshot (see last_snapshot.sql), then a replay of the topic's
-- entries after that snapshot's position, taking per producer the max of max(_highest_sequence_id, _sequence_id)
-- (the max, not Pulsar's last-writer-wins: the two agree while ids only grow, and the max never lowers a mark).
-- Only commits from the snapshot's own onwards can hold later entries, so :since_commit prunes the replay (on
-- Spark, to the topic partitions written since the snapshot).
-- Placeholders: :topic, :topic_table, :producer_sequences, :snapshot_id, :after (the snapshot's position),
-- :since_commit (the snapshot's commit),
-- :replay (false when the snapshot says deduplication is disabled: nothing written then is checked).
SELECT producer, max(sequence_id) AS sequence_id, max(last_publish_time) AS last_publish_time
FROM (
  SELECT producer, sequence_id, last_publish_time
  FROM :producer_sequences
  WHERE topic = :topic AND snapshot_id = :snapshot_id AND producer IS NOT NULL
  UNION ALL
  SELECT _producer, max(_highest_sequence_id), max(_publish_time)
  FROM :topic_table
  WHERE _commit >= :since_commit AND _position > :after AND :replay
  GROUP BY _producer
) AS marks
GROUP BY producer
