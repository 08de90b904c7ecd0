-- rows plan: a large state: the statement's rows, read once into a table (for the next)
SELECT
  payload AS __sd_v0,
  'key:' || MD5(
    CASE
      WHEN request_id IS NULL
      THEN NULL
      ELSE CONCAT('v', CAST(LENGTH(CAST(request_id AS TEXT)) AS TEXT), ':', CAST(request_id AS TEXT))
    END
  ) AS __sd_producer,
  0 AS __sd_sequence_id,
  0 AS __sd_highest
FROM staging;

-- rows plan: a large state: the producers the statement carries (only their marks are joined)
SELECT DISTINCT
  __sd_producer
FROM (
  SELECT
    'key:' || MD5(
      CASE
        WHEN request_id IS NULL
        THEN NULL
        ELSE CONCAT('v', CAST(LENGTH(CAST(request_id AS TEXT)) AS TEXT), ':', CAST(request_id AS TEXT))
      END
    ) AS __sd_producer,
    0 AS __sd_sequence_id,
    0 AS __sd_highest
  FROM staging
) AS k;

-- rows plan: the statement's rows, read once, with their producers' marks
SELECT
  v.*,
  m.sequence_id AS __sd_mark
FROM (
  SELECT
    payload AS __sd_v0,
    'key:' || MD5(
      CASE
        WHEN request_id IS NULL
        THEN NULL
        ELSE CONCAT('v', CAST(LENGTH(CAST(request_id AS TEXT)) AS TEXT), ':', CAST(request_id AS TEXT))
      END
    ) AS __sd_producer,
    0 AS __sd_sequence_id,
    0 AS __sd_highest
  FROM staging
) AS v
LEFT JOIN __sd_marks AS m
  ON m.producer = v.__sd_producer
WHERE
  CASE
    WHEN v.__sd_producer IS NULL
    OR v.__sd_sequence_id IS NULL
    OR v.__sd_sequence_id < 0
    OR v.__sd_sequence_id > 9223372036854775807
    OR v.__sd_highest > 9223372036854775807
    OR v.__sd_highest < v.__sd_sequence_id
    THEN ERROR('seqdedup: an entry is invalid (R4)')
    ELSE TRUE
  END;

-- rows plan: with is_not_dup's third argument: batch entries
SELECT
  COUNT_IF(
    (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    )
    AND __sd_highest > __sd_sequence_id
  )
FROM __sd_rows;

-- rows plan: a small statement that wrote first and left a row unwritten: its rows' keys, read back for its outcome
SELECT
  rowid AS __sd_row,
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  (
    __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
  ) AS __sd_candidate
FROM __sd_rows;

-- rows plan: without ORDER BY or batch entries: repeated keys
SELECT
  __sd_producer,
  __sd_sequence_id,
  MIN(rowid) AS __sd_keep,
  COUNT(*) AS __sd_rows
FROM __sd_rows
WHERE
  (
    __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
  )
GROUP BY
  __sd_producer,
  __sd_sequence_id
HAVING
  COUNT(*) > 1;

-- rows plan: a ledger, or payload conflicts judged: the rows at or below their mark and the repeats, set apart
SELECT
  r.__sd_producer AS producer,
  r.__sd_sequence_id AS sequence_id,
  r.__sd_highest AS highest_sequence_id,
  r.__sd_mark AS mark,
  CAST(NULL AS BIGINT) AS fingerprint,
  CAST(NULL AS TEXT) AS entry
FROM __sd_rows AS r
LEFT JOIN __sd_repeats AS x
  ON x.__sd_producer = r.__sd_producer AND x.__sd_sequence_id = r.__sd_sequence_id
WHERE
  NOT (
    r.__sd_mark IS NULL OR r.__sd_sequence_id > r.__sd_mark
  )
  OR r.rowid <> x.__sd_keep;

-- rows plan: a ledger, or payload conflicts judged, where no row was removed: the rows at or below their mark, set apart
SELECT
  r.__sd_producer AS producer,
  r.__sd_sequence_id AS sequence_id,
  r.__sd_highest AS highest_sequence_id,
  r.__sd_mark AS mark,
  CAST(NULL AS BIGINT) AS fingerprint,
  CAST(NULL AS TEXT) AS entry
FROM __sd_rows AS r
WHERE
  NOT (
    r.__sd_mark IS NULL OR r.__sd_sequence_id > r.__sd_mark
  );

-- rows plan: the repeats removed
DELETE FROM __sd_rows USING   __sd_repeats AS x
WHERE
  (
    __sd_rows.__sd_producer = x.__sd_producer
    AND __sd_rows.__sd_sequence_id = x.__sd_sequence_id
  )
  AND __sd_rows.rowid <> x.__sd_keep;

-- rows plan: with ORDER BY or batch entries: candidates (read by round 1, not kept)
SELECT
  rowid AS __sd_row,
  __sd_producer,
  __sd_sequence_id,
  __sd_highest,
  __sd_mark
FROM __sd_rows
WHERE
  (
    __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
  );

-- rows plan: without batch entries: round 1, its rejected entries only
SELECT
  *
FROM (
  SELECT
    __sd_row,
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
          MAX(__sd_highest) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          ) IS NULL
          OR __sd_sequence_id > MAX(__sd_highest) OVER (
            PARTITION BY __sd_producer
            ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          )
        )
        THEN TRUE
        ELSE FALSE
      END
    ) AS __sd_accepted
  FROM (
    SELECT
      __sd_row,
      __sd_producer,
      __sd_sequence_id,
      __sd_highest,
      __sd_mark,
      CAST(NULL AS BOOLEAN) AS __sd_accepted
    FROM __sd_candidates
  ) AS previous
) AS d
WHERE
  NOT __sd_accepted;

-- rows plan: decisions, round 1
SELECT
  __sd_row,
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
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) IS NULL
        OR __sd_sequence_id > MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN TRUE
      WHEN (
        __sd_sequence_id <= __sd_mark
        OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
        OR __sd_sequence_id <= MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN FALSE
    END
  ) AS __sd_accepted
FROM (
  SELECT
    __sd_row,
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    __sd_mark,
    CAST(NULL AS BOOLEAN) AS __sd_accepted
  FROM __sd_candidates
) AS previous;

-- rows plan: batch entries: the producers with an undecided entry
SELECT DISTINCT
  __sd_producer
FROM __sd_decisions
WHERE
  __sd_accepted IS NULL;

-- rows plan: how many producers have one
SELECT
  COUNT(*)
FROM __sd_pending;

-- rows plan: their rows (a semi-join)
SELECT
  d.*
FROM __sd_decisions AS d
SEMI JOIN __sd_pending AS x
  ON x.__sd_producer = d.__sd_producer;

-- rows plan: undecided entries left
SELECT
  COUNT(*)
FROM __sd_rounds
WHERE
  __sd_accepted IS NULL;

-- rows plan: decisions, next rounds (producers with an undecided entry only)
SELECT
  __sd_row,
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
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST, COALESCE(__sd_accepted, TRUE) DESC NULLS LAST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) IS NULL
        OR __sd_sequence_id > MAX(CASE WHEN __sd_accepted IS NULL OR __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST, COALESCE(__sd_accepted, TRUE) DESC NULLS LAST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN TRUE
      WHEN (
        __sd_sequence_id <= __sd_mark
        OR __sd_sequence_id <= MAX(__sd_sequence_id) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST, COALESCE(__sd_accepted, TRUE) DESC NULLS LAST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
        OR __sd_sequence_id <= MAX(CASE WHEN __sd_accepted THEN __sd_highest END) OVER (
          PARTITION BY __sd_producer
          ORDER BY __sd_sequence_id ASC NULLS FIRST, __sd_highest ASC NULLS FIRST, COALESCE(__sd_accepted, TRUE) DESC NULLS LAST
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      )
      THEN FALSE
    END
  ) AS __sd_accepted
FROM __sd_rounds AS previous;

-- rows plan: the decisions settled: round 1's of the other producers, the last round's of these
SELECT
  d.*
FROM __sd_decisions AS d
ANTI JOIN __sd_pending AS x
  ON x.__sd_producer = d.__sd_producer
UNION ALL
SELECT
  *
FROM __sd_rounds;

-- rows plan: a ledger, or payload conflicts judged: the rows at or below their mark and the rejected, set apart
SELECT
  r.__sd_producer AS producer,
  r.__sd_sequence_id AS sequence_id,
  r.__sd_highest AS highest_sequence_id,
  r.__sd_mark AS mark,
  CAST(NULL AS BIGINT) AS fingerprint,
  CAST(NULL AS TEXT) AS entry
FROM __sd_rows AS r
WHERE
  NOT (
    r.__sd_mark IS NULL OR r.__sd_sequence_id > r.__sd_mark
  )
  OR r.rowid IN (
    SELECT
      __sd_row
    FROM __sd_decisions AS d
    WHERE
      NOT d.__sd_accepted
  );

-- rows plan: the rejected removed
DELETE FROM __sd_rows
WHERE
  rowid IN (
    SELECT
      __sd_row
    FROM __sd_decisions
    WHERE
      NOT __sd_accepted
  );

-- rows plan: outcome per producer (all at once: a statement of keys), where no row was removed
SELECT
  r.__sd_producer AS producer,
  r.__sd_left AS sent,
  r.__sd_written AS written,
  r.__sd_left - r.__sd_written AS duplicates,
  41 + r.__sd_first_written - r.__sd_first + 1 AS first_position,
  41 + r.__sd_last_written - r.__sd_first + 1 AS last_position,
  r.__sd_top AS highest,
  0 AS out_of_order,
  r.__sd_first AS __sd_first_row
FROM (
  SELECT
    __sd_producer,
    COUNT(*) AS __sd_left,
    COUNT_IF((
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    )) AS __sd_written,
    MIN(CASE WHEN (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    ) THEN rowid END) AS __sd_first_written,
    MAX(CASE WHEN (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    ) THEN rowid END) AS __sd_last_written,
    MAX(
      CASE
        WHEN (
          __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
        )
        THEN __sd_highest
      END
    ) AS __sd_top,
    MIN(MIN(rowid)) OVER () AS __sd_first
  FROM __sd_rows
  GROUP BY
    __sd_producer
) AS r
ORDER BY
  producer ASC NULLS FIRST;

-- rows plan: outcome per producer, without ORDER BY or batch entries
SELECT
  r.__sd_producer AS producer,
  r.__sd_left + COALESCE(d.__sd_dropped, 0) AS sent,
  r.__sd_written AS written,
  r.__sd_left + COALESCE(d.__sd_dropped, 0) - r.__sd_written AS duplicates,
  41 + r.__sd_first_written - r.__sd_first + 1 AS first_position,
  41 + r.__sd_last_written - r.__sd_first + 1 AS last_position,
  r.__sd_top AS highest,
  0 AS out_of_order,
  r.__sd_first AS __sd_first_row
FROM (
  SELECT
    __sd_producer,
    COUNT(*) AS __sd_left,
    COUNT_IF((
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    )) AS __sd_written,
    MIN(CASE WHEN (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    ) THEN rowid END) AS __sd_first_written,
    MAX(CASE WHEN (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    ) THEN rowid END) AS __sd_last_written,
    MAX(
      CASE
        WHEN (
          __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
        )
        THEN __sd_highest
      END
    ) AS __sd_top,
    MIN(MIN(rowid)) OVER () AS __sd_first
  FROM __sd_rows
  GROUP BY
    __sd_producer
) AS r
LEFT JOIN (
  SELECT
    __sd_producer,
    SUM(__sd_rows - 1) AS __sd_dropped
  FROM __sd_repeats
  GROUP BY
    __sd_producer
) AS d
  ON d.__sd_producer = r.__sd_producer
ORDER BY
  producer ASC NULLS FIRST;

-- rows plan: outcome per producer, with them
SELECT
  r.__sd_producer AS producer,
  r.__sd_left + COALESCE(d.__sd_dropped, 0) AS sent,
  r.__sd_written AS written,
  r.__sd_left + COALESCE(d.__sd_dropped, 0) - r.__sd_written AS duplicates,
  41 + r.__sd_first_written - r.__sd_first + 1 AS first_position,
  41 + r.__sd_last_written - r.__sd_first + 1 AS last_position,
  r.__sd_top AS highest,
  COALESCE(x.__sd_late, 0) AS out_of_order,
  r.__sd_first AS __sd_first_row
FROM (
  SELECT
    __sd_producer,
    COUNT(*) AS __sd_left,
    COUNT_IF((
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    )) AS __sd_written,
    MIN(CASE WHEN (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    ) THEN rowid END) AS __sd_first_written,
    MAX(CASE WHEN (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    ) THEN rowid END) AS __sd_last_written,
    MAX(
      CASE
        WHEN (
          __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
        )
        THEN __sd_highest
      END
    ) AS __sd_top,
    MIN(MIN(rowid)) OVER () AS __sd_first
  FROM __sd_rows
  GROUP BY
    __sd_producer
) AS r
LEFT JOIN (
  SELECT
    __sd_producer,
    COUNT_IF(NOT __sd_accepted) AS __sd_dropped
  FROM __sd_decisions
  GROUP BY
    __sd_producer
) AS d
  ON d.__sd_producer = r.__sd_producer
LEFT JOIN (
  SELECT
    x.__sd_producer,
    COUNT(DISTINCT x.__sd_sequence_id) AS __sd_late
  FROM __sd_decisions AS x
  ANTI JOIN __sd_rows AS w
    ON w.__sd_producer = x.__sd_producer AND w.__sd_sequence_id = x.__sd_sequence_id
  WHERE
    NOT x.__sd_accepted
  GROUP BY
    x.__sd_producer
) AS x
  ON x.__sd_producer = r.__sd_producer
ORDER BY
  producer ASC NULLS FIRST;

-- rows plan: a small statement without batch entries whose rows are left as they are: the write, numbered, which returns the keys it wrote (its outcome is worked out from them)
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
  __sd_position,
  __sd_position,
  '2026-01-01',
  7
FROM (
  SELECT
    __sd_v0,
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    41 + ROW_NUMBER() OVER () AS __sd_position
  FROM __sd_rows
  WHERE
    (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    )
) AS w
RETURNING _producer AS __sd_producer, _sequence_id AS __sd_sequence_id, _highest_sequence_id AS __sd_highest, _position AS __sd_position;

-- rows plan: that write undone, where an id repeats among the rows it wrote
DELETE FROM main.events
WHERE
  _commit = 7;

-- rows plan: write
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
  __sd_position,
  __sd_position,
  '2026-01-01',
  7
FROM (
  SELECT
    __sd_v0,
    __sd_producer,
    __sd_sequence_id,
    __sd_highest,
    41 + rowid - $__sd_first_row + 1 AS __sd_position
  FROM __sd_rows
  WHERE
    (
      __sd_mark IS NULL OR __sd_sequence_id > __sd_mark
    )
) AS w;
