{#-
  seqdedup_topic: the model's relation is a seqdedup topic, and a run is one statement,
      INSERT INTO <this> (<the SELECT's columns>) <the model's SELECT>
  whose SELECT has its own WHERE is_not_dup(producer, sequence_id): each entry is written once, however often the
  model runs over the same rows. seqdedup commits the statement in a transaction of its own (DuckDB) or as one
  published commit (Spark), so a run killed at any moment leaves the topic as it was.

  Config:
    seqdedup_policies: {snapshot_interval_entries: 1000, ...}   topic policies, applied when they change
    seqdedup_full_refresh: forget_marks                         say on purpose that --full-refresh forgets
                                                                every producer's marks (skipped otherwise)
    seqdedup_id_parts: 2                                        composite ids (R19): is_not_dup(p, (lsn, idx));
                                                                fixed when the topic is created
  Columns: the model's YAML `data_type`s (Spark SQL types), the SELECT's own types for the others (first run).
  Hooks run outside seqdedup's transaction.
-#}
{% materialization seqdedup_topic, default %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- set full_refresh_mode = config.get('seqdedup_full_refresh') -%}
  {#- A full refresh would forget every producer's marks: each entry the SELECT returns would be written again, and
      every retry after it too. So, as dbt does for a model with full_refresh: false, --full-refresh is skipped for a
      topic that exists, with one line that says so, unless forgetting was asked for on purpose. -#}
  {%- set full_refresh = should_full_refresh() -%}
  {%- if full_refresh and existing is not none and full_refresh_mode != 'forget_marks' -%}
    {%- do log("seqdedup topic " ~ this ~ " (" ~ model.unique_id ~ "): --full-refresh skipped, the producers' marks "
               ~ "are kept and the model runs as usual; to forget them on purpose, set "
               ~ "seqdedup_full_refresh: forget_marks on the model", info=True) -%}
    {%- set full_refresh = false -%}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {{ seqdedup.commit_hooks(pre_hooks) }}

  {%- set columns = {} -%}
  {%- for column in model.columns.values() -%}
    {%- do columns.update({column.name: column.data_type}) -%}
  {%- endfor -%}
  {%- do write("-- seqdedup_topic: one statement, committed by seqdedup\nINSERT INTO " ~ this ~ "\n" ~ sql) -%}
  {%- set response = seqdedup.call({
        'action': 'run',
        'schema': this.schema,
        'name': this.identifier,
        'sql': sql,
        'columns': columns,
        'policies': config.get('seqdedup_policies', {}),
        'full_refresh': full_refresh,
        'full_refresh_mode': full_refresh_mode,
        'id_parts': config.get('seqdedup_id_parts'),
        'unique_id': model.unique_id,
      }) -%}
  {%- do store_result('main', response=response) -%}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ seqdedup.commit_hooks(post_hooks) }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#- Commit the dbt transaction that in-transaction hooks opened (seqdedup's own statement is committed already). -#}
{% macro commit_hooks(hooks) %}
  {%- if hooks | selectattr('transaction') | list | length > 0 -%}
    {%- do adapter.commit() -%}
  {%- endif -%}
{% endmacro %}
