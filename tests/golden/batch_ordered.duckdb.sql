-- keys
SELECT
  producer AS __sd_producer,
  seq AS __sd_sequence_id,
  COALESCE(highest, seq) AS __sd_highest,
  arrival AS __sd_o0
FROM staging
WHERE
  NOT payload IS NULL;

-- decisions (round 1)
SELECT
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_o0,
  __sd_mark,
  COUNT(*) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_o0 NULLS FIRST, __sd_sequence_id NULLS FIRST, __sd_highest NULLS FIRST
    RANGE BETWEEN CURRENT ROW AND CURRENT ROW
  ) AS __sd_peers,
  COALESCE(
    __sd_accepted,
    CASE
      WHEN __sd_sequence_id > COALESCE(
        GREATEST(
          __sd_mark,
          MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_o0 NULLS FIRST, __sd_sequence_id NULLS FIRST, __sd_highest NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          )
        ),
        -1
      )
      THEN TRUE
      WHEN __sd_sequence_id <= GREATEST(
        __sd_mark,
        MAX(__sd_sequence_id) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_o0 NULLS FIRST, __sd_sequence_id NULLS FIRST, __sd_highest NULLS FIRST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ),
        MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_o0 NULLS FIRST, __sd_sequence_id NULLS FIRST, __sd_highest NULLS FIRST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN FALSE
    END
  ) AS __sd_accepted
FROM (
  SELECT
    c.__sd_producer,
    c.__sd_sequence_id,
    c.__sd_highest,
    c.__sd_o0,
    s.sequence_id AS __sd_mark,
    CAST(NULL AS BOOLEAN) AS __sd_accepted
  FROM keys AS c
  LEFT JOIN state AS s
    ON s.producer = c.__sd_producer
) AS previous;

-- accepted
SELECT
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_o0,
  __sd_peers,
  41 + ROW_NUMBER() OVER () AS __sd_position
FROM (
  SELECT
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    __sd_o0,
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
      COALESCE(highest, seq) AS __sd_highest,
      arrival AS __sd_o0
    FROM staging
    WHERE
      NOT payload IS NULL
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
    AND c.__sd_o0 IS NOT DISTINCT FROM a.__sd_o0
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
      COALESCE(highest, seq) AS __sd_highest,
      arrival AS __sd_o0
    FROM staging
    WHERE
      NOT payload IS NULL
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
    AND c.__sd_o0 IS NOT DISTINCT FROM a.__sd_o0
  QUALIFY
    ROW_NUMBER() OVER (PARTITION BY a.__sd_position ORDER BY a.__sd_position) = 1
) AS accepted;
