"""seqdedup for dbt: a dbt model whose relation is a topic (the ``seqdedup_topic`` materialization).

The dbt package (the repository's ``dbt/`` folder) holds the Jinja side: the materialization, the generic test
``seqdedup_unique_entries`` and the ``producer_state``/``last_sequence_id`` macros. A macro cannot reach Python, so
each target has a thin bridge in this package that runs seqdedup in dbt's own process:

- ``seqdedup.dbt.duckdb``: a dbt-duckdb plugin (``plugins: [{module: seqdedup.dbt.duckdb}]`` in the profile). It
  registers seqdedup's guard functions on every connection dbt opens, refuses dbt's statements that call
  ``is_not_dup`` (a plain model's), and runs a model's statement on a cursor of its own when the materialization
  hands it over through dbt-duckdb's ``store_relation``.
- ``seqdedup.dbt.spark``: an adapter, type ``seqdedup_spark``, that is dbt-spark (``method: session``) plus one
  ``@available`` method running the statement on dbt's own SparkSession, which it builds quiet; it refuses dbt's
  statements that call ``is_not_dup`` too.

``seqdedup.dbt.model`` is what both share: it turns a model (its SELECT, its YAML columns, its config) into a topic
and one ``INSERT ... WHERE is_not_dup(...)``. Only the bridges import dbt; ``import seqdedup`` never does.
"""
