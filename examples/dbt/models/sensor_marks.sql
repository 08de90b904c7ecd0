{{ config(materialized='table') }}
-- Where each sensor resumes after a restart: its mark in the topic's state (producer_state, read by seqdedup).
select producer as sensor, sequence_id as mark, sequence_id + 1 as next_sequence_id
from {{ seqdedup.producer_state(ref('events')) }} as state
