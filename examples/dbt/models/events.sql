-- The topic: each (producer, seq) once, however often this model runs over the same rows. The same Spark SQL
-- runs on DuckDB and on Spark; seqdedup adds the system columns (_producer, _sequence_id, _position, ...).
{{ config(materialized='seqdedup_topic', seqdedup_policies={'snapshot_interval_entries': 10}) }}

select reading, unit, recorded_at
from {{ ref('stg_events') }}
where is_not_dup(producer, seq)
order by arrival
