{#-
  Reading a topic's state in any model (these read seqdedup's committed state when dbt renders the model):
    select * from {{ seqdedup.producer_state(ref('events')) }} as s       -- producer, sequence_id, last_publish_time
    {{ seqdedup.last_sequence_id(ref('events'), 'sensor-1') }}            -- the producer's mark, -1 when none
  `topic` is a relation (ref() also makes the model depend on the topic) or a name, namespace.name.
-#}
{% macro producer_state(topic) %}
  {%- if not execute -%}
    {{ return("(select cast(null as string) as producer, cast(null as bigint) as sequence_id, "
              ~ "cast(null as timestamp) as last_publish_time)") }}
  {%- endif -%}
  {{ return(seqdedup.call({'action': 'producer_state', 'topic': seqdedup.topic_name(topic)})) }}
{% endmacro %}

{% macro last_sequence_id(topic, producer) %}
  {%- if not execute -%}
    {{ return(-1) }}
  {%- endif -%}
  {{ return(seqdedup.call({'action': 'last_sequence_id', 'topic': seqdedup.topic_name(topic),
                           'producer': producer})) }}
{% endmacro %}

{% macro topic_name(topic) %}
  {%- if topic.identifier is defined -%}
    {{ return(topic.schema ~ '.' ~ topic.identifier) }}
  {%- endif -%}
  {{ return(topic) }}
{% endmacro %}
