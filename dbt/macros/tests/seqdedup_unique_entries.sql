{#-
  seqdedup_unique_entries: every (producer, sequence id) of a topic is held once. An entry covers the ids
  _sequence_id.._highest_sequence_id; ordered by commit and id, each entry of a producer must start above every id
  of its earlier entries. Returns the entries that do not (none: the test passes). A topic whose marks were
  forgotten on purpose (deduplication disabled, seqdedup_full_refresh: forget_marks, an idle producer purged)
  may hold an id again: that is what forgetting means.
-#}
{% test seqdedup_unique_entries(model) %}
select _producer, _sequence_id, _highest_sequence_id, _commit, earlier_highest
from (
  select _producer, _sequence_id, _highest_sequence_id, _commit,
         max(_highest_sequence_id) over (
           partition by _producer order by _commit, _sequence_id, _highest_sequence_id
           rows between unbounded preceding and 1 preceding) as earlier_highest
  from {{ model }}
) entries
where _sequence_id <= earlier_highest
{% endtest %}
