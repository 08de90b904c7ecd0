-- Raw events as they arrived: retransmits (an entry sent again after a timeout) and repeats included.
select
    producer,
    cast(seq as bigint) as seq,
    cast(arrival as bigint) as arrival,
    cast(reading as double) as reading,
    unit,
    cast(recorded_at as timestamp) as recorded_at
from {{ ref('raw_events') }}
