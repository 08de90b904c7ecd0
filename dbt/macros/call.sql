{#-
  seqdedup.call(request): hand a request to seqdedup's Python, in dbt's own process, and return its answer.
  A macro cannot import Python, so each target has a bridge (seqdedup/dbt/ in the seqdedup distribution):
  dbt-duckdb: the plugin seqdedup.dbt.duckdb, reached through dbt-duckdb's store_relation;
  Spark: the seqdedup_spark adapter (dbt-spark, method: session), reached through adapter.seqdedup.
-#}
{% macro call(request) %}
  {{ return(adapter.dispatch('call', 'seqdedup')(request)) }}
{% endmacro %}

{% macro duckdb__call(request) %}
  {#- The plugin registers seqdedup's guards on every connection, as temporary macros: none, no plugin. (The file
      keeps guards of its own for connections seqdedup never configured: those say nothing about the plugin.) -#}
  {%- set found = adapter.execute(
        "select count(*) from duckdb_functions() where function_name = 'is_not_dup' and database_name = 'temp'",
        auto_begin=False, fetch=True)[1] -%}
  {%- if found.rows[0][0] == 0 -%}
    {{ exceptions.raise_compiler_error(
        "seqdedup's dbt-duckdb plugin is not in this profile, so dbt-duckdb cannot run seqdedup; add it to the "
        ~ "output in profiles.yml:\n  plugins:\n    - module: seqdedup.dbt.duckdb") }}
  {%- endif -%}
  {#- dbt-duckdb names a plugin after its module's last part unless the profile gives it an alias. -#}
  {%- do adapter.store_relation(var('seqdedup_duckdb_plugin', 'duckdb'), this, [], '', '', request) -%}
  {{ return(request['answer']) }}
{% endmacro %}

{% macro seqdedup_spark__call(request) %}
  {{ return(adapter.seqdedup(request)) }}
{% endmacro %}

{% macro default__call(request) %}
  {{ exceptions.raise_compiler_error(
      "seqdedup runs on dbt-duckdb (with the plugin seqdedup.dbt.duckdb in the profile) and on Spark through the "
      ~ "adapter seqdedup_spark (type: seqdedup_spark, method: session in the profile); this target's type is "
      ~ target.type) }}
{% endmacro %}
