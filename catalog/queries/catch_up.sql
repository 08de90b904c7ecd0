-- catch_up(topic): what the commits other drivers published since a state this driver holds did, in Spark SQL: the
-- entries of each (commit, producer), with the highest id and last write among them (kind 'entries'), and each
-- snapshot header row those commits carry (kind 'snapshot'): its fields, and whether its attempt won the commit
-- (``won``: the winner recorded it in :commits_table) or the commit has any winner recorded yet (``logged``). Every
-- row of a commit's partition is its winner's (the partition names the winning attempt's directory), so the entries
-- need no :visible; a header row of a losing attempt is told apart by ``won``, and where a commit's winner is not
-- recorded yet (it registered its partition a moment ago, or died since) the caller reads the snapshot headers whole.
-- One read of each table in one query: on Spark, a job per query is most of what a small one costs.
-- Placeholders: :topic, :topic_table, :producer_sequences, :commits_table, :commits (the new commits, on _commit),
-- :logged (the same, on s.commit_id), :after (the state's end: every new entry is after it), :own (seqdedup's rows).
SELECT 'entries' AS kind, _commit AS commit_id, _producer AS producer,
       max(_highest_sequence_id) AS sequence_id, max(_publish_time) AS last_publish_time,
       count(*) AS entries, max(_position) AS position,
       CAST(NULL AS STRING) AS snapshot_kind, CAST(NULL AS BIGINT) AS snapshot_id, CAST(NULL AS BIGINT) AS parent_id,
       CAST(NULL AS BOOLEAN) AS won, CAST(NULL AS BOOLEAN) AS logged
FROM :topic_table
WHERE :commits AND _position > :after AND :own
GROUP BY _commit, _producer
UNION ALL
SELECT 'snapshot', s.commit_id, CAST(NULL AS STRING), NULL, s.taken_at, s.producers, s.position,
       s.kind, s.snapshot_id, s.parent_id, s.attempt IS NULL OR w.attempt = s.attempt, w.commit_id IS NOT NULL
FROM :producer_sequences AS s
LEFT JOIN (SELECT DISTINCT commit_id, attempt FROM :commits_table WHERE topic = :topic) AS w
  ON w.commit_id = s.commit_id
WHERE s.topic = :topic AND :logged AND s.producer IS NULL
