-- Downstream of the topic: counts that retransmits cannot inflate.
select
    _producer as sensor,
    count(*) as readings,
    max(_sequence_id) as last_sequence_id,
    round(avg(reading), 2) as average_reading
from {{ ref('events') }}
group by _producer
