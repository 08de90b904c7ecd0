-- window plan: only when the one pass fails to run: the statement's rows, read once into a table, and the steps below over it
SELECT
  payload AS __sd_v0,
  'key:' || MD5(
    CASE
      WHEN request_id IS NULL
      THEN NULL
      ELSE CONCAT(
        'v',
        CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
        ':',
        CAST(request_id AS STRING)
      )
    END
  ) AS __sd_producer,
  0 AS __sd_sequence_id,
  0 AS __sd_highest
FROM staging;

-- window plan: a large state: the producers the statement carries (only their marks are joined)
SELECT DISTINCT
  __sd_producer
FROM (
  SELECT
    'key:' || MD5(
      CASE
        WHEN request_id IS NULL
        THEN NULL
        ELSE CONCAT(
          'v',
          CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
          ':',
          CAST(request_id AS STRING)
        )
      END
    ) AS __sd_producer,
    0 AS __sd_sequence_id,
    0 AS __sd_highest
  FROM staging
) AS k;

-- window plan: a large unordered statement: its first entries' producers (one may hold most of it)
SELECT
  COUNT(*) AS entries,
  MAX(entries) AS largest
FROM (
  SELECT
    __sd_producer,
    COUNT(*) AS entries
  FROM (
    SELECT
      __sd_producer
    FROM (
      SELECT
        'key:' || MD5(
          CASE
            WHEN request_id IS NULL
            THEN NULL
            ELSE CONCAT(
              'v',
              CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
              ':',
              CAST(request_id AS STRING)
            )
          END
        ) AS __sd_producer,
        0 AS __sd_sequence_id,
        0 AS __sd_highest
      FROM staging
    ) AS k
    LIMIT 10000
  ) AS f
  GROUP BY
    __sd_producer
) AS g;

-- window plan: where one may: the largest producers' ids (such a producer's entries are spread over ranges of its ids)
SELECT
  __sd_producer,
  COUNT(*) AS entries,
  MIN(__sd_sequence_id) AS lowest,
  MAX(__sd_sequence_id) AS highest,
  SUM(COUNT(*)) OVER () AS total,
  SUM(
    COUNT_IF(
      __sd_producer IS NULL
      OR __sd_sequence_id IS NULL
      OR __sd_sequence_id < 0
      OR __sd_sequence_id > 9223372036854775807
      OR __sd_highest > 9223372036854775807
      OR __sd_highest < __sd_sequence_id
    )
  ) OVER () AS invalid
FROM (
  SELECT
    'key:' || MD5(
      CASE
        WHEN request_id IS NULL
        THEN NULL
        ELSE CONCAT(
          'v',
          CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
          ':',
          CAST(request_id AS STRING)
        )
      END
    ) AS __sd_producer,
    0 AS __sd_sequence_id,
    0 AS __sd_highest
  FROM staging
) AS k
GROUP BY
  __sd_producer
ORDER BY
  entries DESC
LIMIT 16;

-- window plan: decide, number and count, in one pass (where the ledger reads them: with each entry's fate; a statement of keys: its copies numbered before the marks are joined)
SELECT
  *,
  LEAD(1) OVER (PARTITION BY __sd_producer ORDER BY __sd_sequence_id, __sd_highest) IS NULL AS __sd_last,
  COUNT(*) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_sent,
  COUNT_IF(__sd_accepted) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_written,
  MIN(CASE WHEN __sd_accepted THEN __sd_position END) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_first_position,
  MAX(CASE WHEN __sd_accepted THEN __sd_position END) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_last_position,
  MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_top
FROM (
  SELECT
    *,
    CAST(41 + (
      MONOTONICALLY_INCREASING_ID() - SHIFTLEFT(CAST(SPARK_PARTITION_ID() AS BIGINT), 33)
    ) * 2 + CAST(SPARK_PARTITION_ID() AS BIGINT) + 1 AS BIGINT) AS __sd_position
  FROM (
    SELECT
      *,
      CASE
        WHEN __sd_invalid
        THEN FALSE
        WHEN (
          __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
        )
        AND (
          MAX(__sd_highest) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id, __sd_highest
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          ) IS NULL
          OR __sd_sequence_id > MAX(__sd_highest) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id, __sd_highest
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          )
        )
        THEN TRUE
        WHEN (
          __sd_sequence_id <= __sd_mark
          OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id, __sd_highest
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          )
        )
        THEN FALSE
      END AS __sd_accepted
    FROM (
      SELECT /*+ REPARTITION(2, __sd_producer) */
        v.*,
        m.sequence_id AS __sd_mark,
        CASE
          WHEN __sd_producer IS NULL
          OR __sd_sequence_id IS NULL
          OR __sd_sequence_id < 0
          OR __sd_sequence_id > 9223372036854775807
          OR __sd_highest > 9223372036854775807
          OR __sd_highest < __sd_sequence_id
          THEN RAISE_ERROR('seqdedup: an entry is invalid (R4)')
          ELSE FALSE
        END AS __sd_invalid
      FROM (
        SELECT
          payload AS __sd_v0,
          'key:' || MD5(
            CASE
              WHEN request_id IS NULL
              THEN NULL
              ELSE CONCAT(
                'v',
                CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
                ':',
                CAST(request_id AS STRING)
              )
            END
          ) AS __sd_producer,
          0 AS __sd_sequence_id,
          0 AS __sd_highest
        FROM staging
      ) AS v
      LEFT JOIN __sd_marks AS m
        ON m.producer = v.__sd_producer
    ) AS c
  ) AS d
) AS n;

-- window plan: metrics, checked before publishing
SELECT
  COUNT_IF(__sd_invalid) AS invalid,
  COUNT_IF(__sd_accepted IS NULL) AS undecided,
  MAX(CASE WHEN __sd_accepted THEN __sd_position END) AS end,
  COUNT_IF(__sd_accepted) AS written
FROM __sd_decided;

-- window plan: outcome per producer (its last row; all at once: a statement of keys)
SELECT
  __sd_producer AS producer,
  __sd_sent AS sent,
  __sd_written AS written,
  __sd_sent - __sd_written AS duplicates,
  __sd_first_position AS first_position,
  __sd_last_position AS last_position,
  __sd_top AS highest,
  0 AS out_of_order
FROM __sd_decided
WHERE
  __sd_last;

-- window plan: write
INSERT INTO main.events (
  `payload`,
  `_producer`,
  `_sequence_id`,
  `_highest_sequence_id`,
  `_position`,
  `_publish_time`,
  `_commit`
)
SELECT
  __sd_v0,
  __sd_producer,
  __sd_sequence_id,
  __sd_position,
  __sd_position,
  '2026-01-01',
  7
FROM (
  SELECT
    *
  FROM __sd_decided
  WHERE
    __sd_accepted
) AS w;

-- window plan: where the ledger reads them: write, the dropped entries staged apart
INSERT INTO main.events (
  `payload`,
  `_producer`,
  `_sequence_id`,
  `_highest_sequence_id`,
  `_position`,
  `_publish_time`,
  `_commit`,
  __sd_dropped
)
SELECT
  __sd_v0,
  __sd_producer,
  __sd_sequence_id,
  CASE WHEN __sd_accepted THEN __sd_position ELSE __sd_highest END,
  CASE WHEN __sd_accepted THEN __sd_position ELSE __sd_mark END,
  '2026-01-01',
  7,
  __sd_dropped
FROM (
  SELECT
    *
  FROM __sd_decided
  WHERE
    __sd_accepted OR __sd_dropped
) AS w;

-- window plan, a small statement: decide, number and count, in one pass (where the ledger reads them: with each entry's fate; a statement of keys: its copies numbered before the marks are joined)
SELECT
  *,
  LEAD(1) OVER (PARTITION BY __sd_producer ORDER BY __sd_sequence_id, __sd_highest) IS NULL AS __sd_last,
  COUNT(*) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_sent,
  COUNT_IF(__sd_accepted) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_written,
  MIN(CASE WHEN __sd_accepted THEN __sd_position END) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_first_position,
  MAX(CASE WHEN __sd_accepted THEN __sd_position END) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_last_position,
  MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
    PARTITION BY __sd_producer
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_top
FROM (
  SELECT
    *,
    CAST(CAST(41 AS DECIMAL(20, 0)) + (
      MONOTONICALLY_INCREASING_ID() - SHIFTLEFT(CAST(SPARK_PARTITION_ID() AS BIGINT), 33)
    ) * 2 + CAST(SPARK_PARTITION_ID() AS BIGINT) + 1 AS BIGINT) AS __sd_position
  FROM (
    SELECT
      *,
      CASE
        WHEN __sd_invalid
        THEN FALSE
        WHEN (
          __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
        )
        AND (
          MAX(__sd_highest) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id, __sd_highest
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          ) IS NULL
          OR __sd_sequence_id > MAX(__sd_highest) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id, __sd_highest
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          )
        )
        THEN TRUE
        WHEN (
          __sd_sequence_id <= __sd_mark
          OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id, __sd_highest
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          )
        )
        THEN FALSE
      END AS __sd_accepted
    FROM (
      SELECT /*+ COALESCE(1) */
        v.*,
        CAST(TRY_ELEMENT_AT(:__sd_marks, v.__sd_producer) AS BIGINT) AS __sd_mark,
        CASE
          WHEN __sd_producer IS NULL
          OR __sd_sequence_id IS NULL
          OR __sd_sequence_id < 0
          OR __sd_sequence_id > 9223372036854775807
          OR __sd_highest > 9223372036854775807
          OR __sd_highest < __sd_sequence_id
          THEN RAISE_ERROR('seqdedup: an entry is invalid (R4)')
          ELSE FALSE
        END AS __sd_invalid
      FROM (
        SELECT
          payload AS __sd_v0,
          'key:' || MD5(
            CASE
              WHEN request_id IS NULL
              THEN NULL
              ELSE CONCAT(
                'v',
                CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
                ':',
                CAST(request_id AS STRING)
              )
            END
          ) AS __sd_producer,
          0 AS __sd_sequence_id,
          0 AS __sd_highest
        FROM staging
      ) AS v
    ) AS c
  ) AS d
) AS n;

-- window plan, a producer spread over ranges of its ids: decide, number and count, in one pass (where the ledger reads them: with each entry's fate; a statement of keys: its copies numbered before the marks are joined)
SELECT
  *,
  LEAD(1) OVER (PARTITION BY __sd_producer, __sd_range ORDER BY __sd_sequence_id, __sd_highest) IS NULL AS __sd_last,
  COUNT_IF(NOT __sd_reach > 0) OVER (
    PARTITION BY __sd_producer, __sd_range
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_sent,
  COUNT_IF(__sd_accepted) OVER (
    PARTITION BY __sd_producer, __sd_range
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_written,
  MIN(CASE WHEN __sd_accepted THEN __sd_position END) OVER (
    PARTITION BY __sd_producer, __sd_range
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_first_position,
  MAX(CASE WHEN __sd_accepted THEN __sd_position END) OVER (
    PARTITION BY __sd_producer, __sd_range
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_last_position,
  MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
    PARTITION BY __sd_producer, __sd_range
    ORDER BY __sd_sequence_id, __sd_highest
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS __sd_top
FROM (
  SELECT
    *,
    CAST(41 + (
      MONOTONICALLY_INCREASING_ID() - SHIFTLEFT(CAST(SPARK_PARTITION_ID() AS BIGINT), 33)
    ) * 2 + CAST(SPARK_PARTITION_ID() AS BIGINT) + 1 AS BIGINT) AS __sd_position
  FROM (
    SELECT
      *,
      CASE
        WHEN __sd_reach > 0
        THEN FALSE
        ELSE CASE
          WHEN __sd_invalid
          THEN FALSE
          WHEN (
            __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
          )
          AND (
            MAX(__sd_highest) OVER (
              PARTITION BY __sd_producer, __sd_range
              ORDER BY __sd_sequence_id, __sd_highest
              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ) IS NULL
            OR __sd_sequence_id > MAX(__sd_highest) OVER (
              PARTITION BY __sd_producer, __sd_range
              ORDER BY __sd_sequence_id, __sd_highest
              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            )
          )
          THEN TRUE
          WHEN (
            __sd_sequence_id <= __sd_mark
            OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
              PARTITION BY __sd_producer, __sd_range
              ORDER BY __sd_sequence_id, __sd_highest
              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            )
          )
          THEN FALSE
        END
      END AS __sd_accepted
    FROM (
      SELECT /*+ REPARTITION(2, __sd_range) */
        v.*,
        m.sequence_id AS __sd_mark,
        CASE
          WHEN __sd_producer IS NULL
          OR __sd_sequence_id IS NULL
          OR __sd_sequence_id < 0
          OR __sd_sequence_id > 9223372036854775807
          OR __sd_highest > 9223372036854775807
          OR __sd_highest < __sd_sequence_id
          THEN RAISE_ERROR('seqdedup: an entry is invalid (R4)')
          ELSE FALSE
        END AS __sd_invalid,
        POSEXPLODE(
          CASE
            WHEN __sd_producer = 'p'
            THEN SLICE(
              ARRAY(0, 1, 4, 5),
              CASE
                WHEN __sd_sequence_id < 250
                THEN 1
                WHEN __sd_sequence_id < 500
                THEN 2
                WHEN __sd_sequence_id < 750
                THEN 3
                ELSE 4
              END,
              GREATEST(
                CASE
                  WHEN __sd_highest < 250
                  THEN 1
                  WHEN __sd_highest < 500
                  THEN 2
                  WHEN __sd_highest < 750
                  THEN 3
                  ELSE 4
                END - CASE
                  WHEN __sd_sequence_id < 250
                  THEN 1
                  WHEN __sd_sequence_id < 500
                  THEN 2
                  WHEN __sd_sequence_id < 750
                  THEN 3
                  ELSE 4
                END,
                0
              ) + 1
            )
            ELSE ARRAY(HASH(__sd_producer))
          END
        ) AS (__sd_reach, __sd_range)
      FROM (
        SELECT
          payload AS __sd_v0,
          'key:' || MD5(
            CASE
              WHEN request_id IS NULL
              THEN NULL
              ELSE CONCAT(
                'v',
                CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
                ':',
                CAST(request_id AS STRING)
              )
            END
          ) AS __sd_producer,
          0 AS __sd_sequence_id,
          0 AS __sd_highest
        FROM staging
      ) AS v
      LEFT JOIN __sd_marks AS m
        ON m.producer = v.__sd_producer
    ) AS c
  ) AS d
) AS n;

-- window plan, a statement of keys, its outcome reported together: decide, number and count, in one pass (where the ledger reads them: with each entry's fate; a statement of keys: its copies numbered before the marks are joined)
SELECT
  *,
  TRUE AS __sd_last,
  1 AS __sd_sent,
  CASE WHEN __sd_accepted THEN 1 ELSE 0 END AS __sd_written,
  CASE WHEN __sd_accepted THEN __sd_position END AS __sd_first_position,
  CASE WHEN __sd_accepted THEN __sd_position END AS __sd_last_position,
  CASE WHEN __sd_accepted THEN __sd_highest END AS __sd_top
FROM (
  SELECT
    *,
    NOT __sd_invalid
    AND (
      __sd_copy = 1 AND (
        __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
      )
    ) AS __sd_accepted
  FROM (
    SELECT
      v.*,
      m.sequence_id AS __sd_mark
    FROM (
      SELECT
        *,
        CAST(41 + (
          MONOTONICALLY_INCREASING_ID() - SHIFTLEFT(CAST(SPARK_PARTITION_ID() AS BIGINT), 33)
        ) * 2 + CAST(SPARK_PARTITION_ID() AS BIGINT) + 1 AS BIGINT) AS __sd_position
      FROM (
        SELECT
          *,
          ROW_NUMBER() OVER (PARTITION BY __sd_producer ORDER BY __sd_sequence_id, __sd_highest) AS __sd_copy
        FROM (
          SELECT /*+ REPARTITION(2, __sd_producer) */
            v.*,
            CASE
              WHEN __sd_producer IS NULL
              OR __sd_sequence_id IS NULL
              OR __sd_sequence_id < 0
              OR __sd_sequence_id > 9223372036854775807
              OR __sd_highest > 9223372036854775807
              OR __sd_highest < __sd_sequence_id
              THEN RAISE_ERROR('seqdedup: an entry is invalid (R4)')
              ELSE FALSE
            END AS __sd_invalid
          FROM (
            SELECT
              payload AS __sd_v0,
              'key:' || MD5(
                CASE
                  WHEN request_id IS NULL
                  THEN NULL
                  ELSE CONCAT(
                    'v',
                    CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
                    ':',
                    CAST(request_id AS STRING)
                  )
                END
              ) AS __sd_producer,
              0 AS __sd_sequence_id,
              0 AS __sd_highest
            FROM staging
          ) AS v
        ) AS c
      ) AS n
    ) AS v
    LEFT JOIN __sd_marks AS m
      ON m.producer = v.__sd_producer
  ) AS d
) AS k;

-- window plan, a statement of keys, its outcome reported together: outcome per producer (its last row; all at once: a statement of keys)
SELECT
  SUM(CASE WHEN __sd_last THEN __sd_sent END) AS sent,
  SUM(CASE WHEN __sd_last THEN __sd_written END) AS written,
  SUM(CASE WHEN __sd_last THEN __sd_sent - __sd_written END) AS duplicates,
  MIN(CASE WHEN __sd_last THEN __sd_first_position END) AS first_position,
  MAX(CASE WHEN __sd_last THEN __sd_last_position END) AS last_position,
  MAX(CASE WHEN __sd_last THEN __sd_top END) AS highest,
  SUM(CASE WHEN __sd_last THEN 0 END) AS out_of_order
FROM __sd_decided;

-- exceptions plan: the statement's rows, read once into a table
SELECT
  payload AS __sd_v0,
  'key:' || MD5(
    CASE
      WHEN request_id IS NULL
      THEN NULL
      ELSE CONCAT(
        'v',
        CAST(LENGTH(CAST(request_id AS STRING)) AS STRING),
        ':',
        CAST(request_id AS STRING)
      )
    END
  ) AS __sd_producer,
  0 AS __sd_sequence_id,
  0 AS __sd_highest
FROM staging;

-- exceptions plan: a large state: the producers the statement carries (only their marks are joined)
SELECT DISTINCT
  __sd_producer
FROM (
  SELECT
    __sd_producer,
    __sd_sequence_id,
    __sd_highest
  FROM __sd_values
) AS k;

-- exceptions plan: producers
SELECT
  *,
  COALESCE(
    SUM(__sd_room) OVER (ORDER BY __sd_producer ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
    0
  ) AS __sd_offset
FROM (
  SELECT
    *,
    __sd_largest - __sd_smallest > 4 * __sd_candidates + 64 AS __sd_sparse,
    CASE
      WHEN __sd_candidates = 0
      THEN 0
      WHEN __sd_largest - __sd_smallest > 4 * __sd_candidates + 64
      THEN __sd_candidates
      ELSE __sd_largest - __sd_smallest + 1
    END AS __sd_room
  FROM (
    SELECT
      k.__sd_producer,
      MAX(m.sequence_id) AS __sd_mark,
      COUNT(*) AS __sd_sent,
      COUNT_IF(k.__sd_sequence_id > COALESCE(m.sequence_id, -1)) AS __sd_candidates,
      MIN(
        CASE
          WHEN k.__sd_sequence_id > COALESCE(m.sequence_id, -1)
          THEN k.__sd_sequence_id
        END
      ) AS __sd_smallest,
      MAX(
        CASE
          WHEN k.__sd_sequence_id > COALESCE(m.sequence_id, -1)
          THEN k.__sd_sequence_id
        END
      ) AS __sd_largest,
      COUNT_IF(
        k.__sd_sequence_id > COALESCE(m.sequence_id, -1)
        AND k.__sd_highest > k.__sd_sequence_id
      ) AS __sd_batches,
      COUNT_IF(
        k.__sd_producer IS NULL
        OR k.__sd_sequence_id IS NULL
        OR k.__sd_sequence_id < 0
        OR k.__sd_sequence_id > 9223372036854775807
        OR k.__sd_highest > 9223372036854775807
        OR k.__sd_highest < k.__sd_sequence_id
      ) AS __sd_invalid
    FROM (
      SELECT
        __sd_producer,
        __sd_sequence_id,
        __sd_highest
      FROM __sd_values
    ) AS k
    LEFT JOIN __sd_marks AS m
      ON m.producer = k.__sd_producer
    GROUP BY
      k.__sd_producer
  ) AS a
) AS r;

-- exceptions plan: invalid entries, batch entries, positions reserved
SELECT
  COALESCE(SUM(__sd_invalid), 0),
  COALESCE(SUM(__sd_batches), 0),
  COALESCE(SUM(__sd_room), 0),
  COUNT_IF(__sd_sparse)
FROM __sd_producers;

-- exceptions plan: exceptions, without ORDER BY or batch entries: repeated keys
SELECT
  c.__sd_producer,
  c.__sd_sequence_id,
  c.__sd_highest,
  COUNT(*) AS __sd_rows,
  1 AS __sd_kept
FROM (
  SELECT
    k.*,
    p.__sd_mark
  FROM (
    SELECT
      __sd_producer,
      __sd_sequence_id,
      __sd_highest
    FROM __sd_values
  ) AS k
  JOIN __sd_producers AS p
    ON p.__sd_producer = k.__sd_producer
  WHERE
    k.__sd_sequence_id > COALESCE(p.__sd_mark, -1)
) AS c
GROUP BY
  c.__sd_producer,
  c.__sd_sequence_id,
  c.__sd_highest
HAVING
  COUNT(*) > 1;

-- exceptions plan: counts from the repeats
SELECT
  c.__sd_producer,
  COUNT(*) - COALESCE(MAX(x.extra), 0) AS __sd_written,
  COUNT(*) - COALESCE(MAX(x.extra), 0) AS __sd_ids,
  MIN(c.__sd_sequence_id) AS __sd_first,
  MAX(c.__sd_sequence_id) AS __sd_last,
  MAX(c.__sd_highest) AS __sd_top
FROM (
  SELECT
    k.*,
    p.__sd_mark
  FROM (
    SELECT
      __sd_producer,
      __sd_sequence_id,
      __sd_highest
    FROM __sd_values
  ) AS k
  JOIN __sd_producers AS p
    ON p.__sd_producer = k.__sd_producer
  WHERE
    k.__sd_sequence_id > COALESCE(p.__sd_mark, -1)
) AS c
LEFT JOIN (
  SELECT
    __sd_producer,
    SUM(__sd_rows - 1) AS extra
  FROM __sd_exceptions
  GROUP BY
    __sd_producer
) AS x
  ON x.__sd_producer = c.__sd_producer
GROUP BY
  c.__sd_producer;

-- exceptions plan: candidates, with ORDER BY or batch entries
SELECT
  k.*,
  p.__sd_mark
FROM (
  SELECT
    __sd_producer,
    __sd_sequence_id,
    __sd_highest
  FROM __sd_values
) AS k
JOIN __sd_producers AS p
  ON p.__sd_producer = k.__sd_producer
WHERE
  k.__sd_sequence_id > COALESCE(p.__sd_mark, -1);

-- exceptions plan: decisions, round 1
SELECT
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_mark,
  COALESCE(
    __sd_accepted,
    CASE
      WHEN (
        __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
      )
      AND (
        MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) IS NULL
        OR __sd_sequence_id > MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN TRUE
      WHEN (
        __sd_sequence_id <= __sd_mark
        OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
        OR __sd_sequence_id <= MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN FALSE
    END
  ) AS __sd_accepted
FROM (
  SELECT
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    __sd_mark,
    CAST(NULL AS BOOLEAN) AS __sd_accepted
  FROM __sd_candidates
) AS previous;

-- exceptions plan: batch entries: the producers with an undecided entry
SELECT DISTINCT
  __sd_producer
FROM __sd_decisions
WHERE
  __sd_accepted IS NULL;

-- exceptions plan: how many producers have one
SELECT
  COUNT(*)
FROM __sd_pending;

-- exceptions plan: their rows (a semi-join)
SELECT
  d.*
FROM __sd_decisions AS d
SEMI JOIN __sd_pending AS x
  ON x.__sd_producer = d.__sd_producer;

-- exceptions plan: undecided entries left
SELECT
  COUNT(*)
FROM __sd_rounds
WHERE
  __sd_accepted IS NULL;

-- exceptions plan: decisions, next rounds (producers with an undecided entry only)
SELECT
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_mark,
  COALESCE(
    __sd_accepted,
    CASE
      WHEN (
        __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
      )
      AND (
        MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest, COALESCE(__sd_accepted, TRUE) DESC
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) IS NULL
        OR __sd_sequence_id > MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest, COALESCE(__sd_accepted, TRUE) DESC
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN TRUE
      WHEN (
        __sd_sequence_id <= __sd_mark
        OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest, COALESCE(__sd_accepted, TRUE) DESC
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
        OR __sd_sequence_id <= MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id, __sd_highest, COALESCE(__sd_accepted, TRUE) DESC
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN FALSE
    END
  ) AS __sd_accepted
FROM __sd_rounds AS previous;

-- exceptions plan: the decisions settled: round 1's of the other producers, the last round's of these
SELECT
  d.*
FROM __sd_decisions AS d
ANTI JOIN __sd_pending AS x
  ON x.__sd_producer = d.__sd_producer
UNION ALL
SELECT
  *
FROM __sd_rounds;

-- exceptions plan: exceptions from the decisions
SELECT
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  COUNT(*) AS __sd_rows,
  COUNT_IF(__sd_accepted) AS __sd_kept
FROM __sd_decisions
GROUP BY
  __sd_producer,
  __sd_sequence_id,
  __sd_highest
HAVING
  COUNT_IF(__sd_accepted) = 0 OR COUNT(*) > 1;

-- exceptions plan: counts from the decisions
SELECT
  __sd_producer,
  COUNT_IF(__sd_accepted) AS __sd_written,
  COUNT(DISTINCT __sd_sequence_id) AS __sd_ids,
  MIN(CASE WHEN __sd_accepted THEN __sd_sequence_id END) AS __sd_first,
  MAX(CASE WHEN __sd_accepted THEN __sd_sequence_id END) AS __sd_last,
  MAX(CASE WHEN __sd_accepted THEN __sd_highest END) AS __sd_top
FROM __sd_decisions
GROUP BY
  __sd_producer;

-- exceptions plan: outcome per producer
SELECT
  p.__sd_producer AS producer,
  p.__sd_sent AS sent,
  COALESCE(c.__sd_written, 0) AS written,
  p.__sd_sent - COALESCE(c.__sd_written, 0) AS duplicates,
  CASE
    WHEN c.__sd_written > 0
    THEN 41 + p.__sd_offset + CASE WHEN p.__sd_sparse THEN 1 ELSE c.__sd_first - p.__sd_smallest + 1 END
  END AS first_position,
  CASE
    WHEN c.__sd_written > 0
    THEN 41 + p.__sd_offset + CASE
      WHEN p.__sd_sparse
      THEN c.__sd_written
      ELSE c.__sd_last - p.__sd_smallest + 1
    END
  END AS last_position,
  c.__sd_top AS highest,
  COALESCE(c.__sd_ids, 0) - COALESCE(c.__sd_written, 0) AS out_of_order
FROM __sd_producers AS p
LEFT JOIN __sd_counts AS c
  ON c.__sd_producer = p.__sd_producer;

-- exceptions plan: keys written once out of several rows
SELECT
  COUNT_IF(__sd_kept = 1)
FROM __sd_exceptions;

-- exceptions plan: write
INSERT INTO main.events (
  `payload`,
  `_producer`,
  `_sequence_id`,
  `_highest_sequence_id`,
  `_position`,
  `_publish_time`,
  `_commit`
)
SELECT
  __sd_v0,
  __sd_producer,
  __sd_sequence_id,
  __sd_position,
  __sd_position,
  '2026-01-01',
  7
FROM (
  SELECT
    v.__sd_v0,
    v.__sd_producer,
    v.__sd_sequence_id,
    v.__sd_highest,
    CASE
      WHEN NOT p.__sd_sparse
      THEN 41 + p.__sd_offset + (
        v.__sd_sequence_id - p.__sd_smallest + 1
      )
    END AS __sd_position
  FROM (
    SELECT
      *
    FROM __sd_values
  ) AS v
  JOIN __sd_producers AS p
    ON p.__sd_producer = v.__sd_producer
  WHERE
    v.__sd_sequence_id > COALESCE(p.__sd_mark, -1)
    AND NOT EXISTS(
      SELECT
        1
      FROM __sd_exceptions AS x
      WHERE
        x.__sd_producer = v.__sd_producer
        AND x.__sd_sequence_id = v.__sd_sequence_id
        AND x.__sd_highest = v.__sd_highest
    )
    AND NOT p.__sd_sparse
  UNION ALL
  SELECT
    __sd_v0,
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    CASE
      WHEN __sd_sparse
      THEN 41 + __sd_offset + ROW_NUMBER() OVER (PARTITION BY __sd_producer ORDER BY __sd_sequence_id NULLS LAST)
      ELSE __sd_by_id
    END AS __sd_position
  FROM (
    SELECT
      __sd_v0,
      __sd_producer,
      __sd_sequence_id,
      __sd_highest,
      __sd_by_id,
      __sd_sparse,
      __sd_offset
    FROM (
      SELECT
        v.__sd_v0,
        v.__sd_producer,
        v.__sd_sequence_id,
        v.__sd_highest,
        CASE
          WHEN NOT p.__sd_sparse
          THEN 41 + p.__sd_offset + (
            v.__sd_sequence_id - p.__sd_smallest + 1
          )
        END AS __sd_by_id,
        p.__sd_sparse AS __sd_sparse,
        p.__sd_offset AS __sd_offset,
        ROW_NUMBER() OVER (
          PARTITION BY v.__sd_producer, v.__sd_sequence_id, v.__sd_highest
          ORDER BY v.__sd_producer NULLS LAST, v.__sd_sequence_id NULLS LAST, v.__sd_highest NULLS LAST
        ) AS _w
      FROM (
        SELECT
          *
        FROM __sd_values
      ) AS v
      JOIN __sd_producers AS p
        ON p.__sd_producer = v.__sd_producer
      WHERE
        v.__sd_sequence_id > COALESCE(p.__sd_mark, -1)
        AND NOT EXISTS(
          SELECT
            1
          FROM __sd_exceptions AS x
          WHERE
            (
              x.__sd_producer = v.__sd_producer
              AND x.__sd_sequence_id = v.__sd_sequence_id
              AND x.__sd_highest = v.__sd_highest
            )
            AND x.__sd_kept = 0
        )
        AND (
          p.__sd_sparse
          OR EXISTS(
            SELECT
              1
            FROM __sd_exceptions AS x
            WHERE
              (
                x.__sd_producer = v.__sd_producer
                AND x.__sd_sequence_id = v.__sd_sequence_id
                AND x.__sd_highest = v.__sd_highest
              )
              AND x.__sd_kept = 1
          )
        )
    ) AS _t
    WHERE
      _w = 1
  ) AS w
) AS w;

-- exceptions plan: the outcome, read by the driver
SELECT
  producer,
  sent,
  written,
  duplicates,
  first_position,
  last_position,
  highest,
  out_of_order
FROM __sd_outcome
ORDER BY
  producer;
