-- keys
SELECT
  producer AS __sd_producer,
  seq AS __sd_sequence_id,
  seq AS __sd_highest
FROM staging;

-- decisions (fast path)
SELECT
  c.__sd_producer,
  c.__sd_sequence_id,
  c.__sd_highest,
  COUNT(*) AS __sd_peers
FROM keys AS c
LEFT JOIN state AS s
  ON s.producer = c.__sd_producer
WHERE
  c.__sd_sequence_id > COALESCE(s.sequence_id, -1)
GROUP BY
  c.__sd_producer,
  c.__sd_sequence_id,
  c.__sd_highest;

-- accepted
SELECT
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_peers,
  41 + ROW_NUMBER() OVER () AS __sd_position
FROM (
  SELECT
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    __sd_peers
  FROM decisions
  WHERE
    __sd_accepted
) AS accepted;

-- insert
INSERT INTO main.events (
  "payload",
  "_producer",
  "_sequence_id",
  "_highest_sequence_id",
  "_position",
  "_publish_time",
  "_commit"
)
SELECT
  __sd_v0,
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_position,
  '2026-01-01',
  7
FROM (
  SELECT
    c.__sd_v0,
    a.__sd_producer,
    a.__sd_sequence_id,
    a.__sd_highest,
    a.__sd_position
  FROM (
    SELECT
      payload AS __sd_v0,
      producer AS __sd_producer,
      seq AS __sd_sequence_id,
      seq AS __sd_highest
    FROM staging
  ) AS c
  JOIN (
    SELECT
      *
    FROM accepted
    WHERE
      __sd_peers = 1
  ) AS a
    ON c.__sd_producer = a.__sd_producer
    AND c.__sd_sequence_id = a.__sd_sequence_id
    AND c.__sd_highest = a.__sd_highest
  UNION ALL
  SELECT
    c.__sd_v0,
    a.__sd_producer,
    a.__sd_sequence_id,
    a.__sd_highest,
    a.__sd_position
  FROM (
    SELECT
      payload AS __sd_v0,
      producer AS __sd_producer,
      seq AS __sd_sequence_id,
      seq AS __sd_highest
    FROM staging
  ) AS c
  JOIN (
    SELECT
      *
    FROM accepted
    WHERE
      __sd_peers > 1
  ) AS a
    ON c.__sd_producer = a.__sd_producer
    AND c.__sd_sequence_id = a.__sd_sequence_id
    AND c.__sd_highest = a.__sd_highest
  QUALIFY
    ROW_NUMBER() OVER (PARTITION BY a.__sd_position ORDER BY a.__sd_position) = 1
) AS accepted;
