-- catch_up(topic): what the commits other drivers published since a state this driver holds did, in Spark SQL: the
-- entries of each (commit, producer), with the highest id and last write among them, and each commit that wrote a
-- snapshot header (a snapshot, a purge, a policy's: then the state is recovered whole, not caught up). Every row of
-- a commit's partition is its winner's (the partition names the winning attempt's directory), so the entries need
-- no :visible; a snapshot row of a losing attempt only makes the caller recover whole, which is always right.
-- One read of each table in one query: on Spark, a job per query is most of what a small one costs.
-- Placeholders: :topic, :topic_table, :producer_sequences, :commits (the new commits, on _commit), :logged (the same,
-- on commit_id), :after (the state's end: every new entry is after it), :own (seqdedup's rows).
SELECT 'entries' AS kind, _commit AS commit_id, _producer AS producer,
       max(_highest_sequence_id) AS sequence_id, max(_publish_time) AS last_publish_time,
       count(*) AS entries, max(_position) AS position
FROM :topic_table
WHERE :commits AND _position > :after AND :own
GROUP BY _commit, _producer
UNION ALL
SELECT 'snapshot', commit_id, CAST(NULL AS STRING), CAST(NULL AS BIGINT), CAST(NULL AS TIMESTAMP), count(*),
       CAST(NULL AS BIGINT)
FROM :producer_sequences
WHERE topic = :topic AND :logged AND producer IS NULL
GROUP BY commit_id
