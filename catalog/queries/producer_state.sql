-- producer_state(topic): the recovered high-water marks of one topic (rule R7), in Spark SQL.
-- The snapshot rows of the chain (:in_chain: the latest complete full snapshot and the increments after it, see
-- catalog.state.Chain), the newest row per producer winning (a NULL sequence_id there is a tombstone: the producer
-- was purged), then a replay of the topic's entries after the chain's position, taking per producer the max of
-- max(_highest_sequence_id, _sequence_id) (the max, not Pulsar's last-writer-wins: the two agree while ids only
-- grow, and the max never lowers a mark). ``replayed`` says which producers the replay moved: they changed since
-- the chain's last snapshot, and the next increment holds them.
-- Only commits from the chain's last one onwards can hold later entries, so :since_commit prunes the replay (on
-- Spark, to the topic partitions written since the snapshot). :own keeps the rows seqdedup wrote (foreign rows,
-- written around it, count for nothing: catalog.schema.written_by_seqdedup).
-- Placeholders: :topic, :topic_table, :producer_sequences, :in_chain, :after (the chain's position),
-- :since_commit (its last commit), :own,
-- :replay (false when the snapshot says deduplication is disabled: nothing written then is checked).
SELECT producer, max(sequence_id) AS sequence_id, max(last_publish_time) AS last_publish_time,
       max(replayed) AS replayed
FROM (
  SELECT producer, sequence_id, last_publish_time, false AS replayed
  FROM (
    SELECT producer, sequence_id, last_publish_time,
           row_number() OVER (PARTITION BY producer ORDER BY snapshot_id DESC) AS newest
    FROM :producer_sequences
    WHERE topic = :topic AND :in_chain AND producer IS NOT NULL
  ) AS rows
  WHERE newest = 1
  UNION ALL
  SELECT _producer, max(_highest_sequence_id), max(_publish_time), true
  FROM :topic_table
  WHERE _commit >= :since_commit AND _position > :after AND :replay AND :own
  GROUP BY _producer
) AS marks
GROUP BY producer
HAVING max(sequence_id) IS NOT NULL
