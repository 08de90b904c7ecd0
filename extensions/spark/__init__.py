"""The Spark engine: any SparkSession a user has, or a local one with a Hive catalog (embedded Derby) so topics and
state persist across processes on one machine.

Atomic publish without Delta or Iceberg. Spark has no transactions, and a plain INSERT into a Parquet table is not
atomic: a driver killed during the job commit leaves part of the files visible. So a topic is a Parquet table
partitioned by ``_commit``, and a commit (see catalog/schema.py) is written in two steps:

1. its topic rows go to a new directory nobody reads (``<table>/_seqdedup_commits/<commit>-<attempt>``), and its
   catalog rows are appended with their ``commit_id``;
2. ``ALTER TABLE ... ADD PARTITION (_commit = N) LOCATION ...`` registers the directory: one metastore transaction,
   the moment the commit becomes visible.

A crash before step 2 leaves an unregistered directory (invisible; its attempt id keeps a retry from reusing it) and
catalog rows whose commit is not published, which every read leaves out (``Commits.visible``).

A partition whose directory seqdedup did not stage (a plain INSERT into the table makes one) is foreign: never a
published commit, its number never taken, its rows left out of every read (``layout.staged``, seqdedup/core/foreign.py).

The package, one job a module:

- ``session``: a local SparkSession with a Hive catalog, its settings and the home's lock; ``connect_server`` (a
  local Spark Connect server with the same settings) and ``metastore`` (a shared metastore's schema).
- ``adapter``: ``SparkAdapter``, the queries and the engine's flags; it holds the collaborators below, each doing one
  job of the storage protocol through the adapter's public methods (``collaborator``): ``scratch`` (the steps'
  temporary tables), ``files`` (where tables live, appends, deletes), ``partitions`` (the metastore's listing and
  registration), ``commits`` (stage, publish, which rows count), ``compaction`` and ``quarantine`` (foreign rows).
- ``layout`` (staging directories and what a listing says), ``errors``, ``calls`` (the settings each call holds),
  ``frames`` (Arrow in and out, observations), ``jvm`` (Py4J helpers); ``guards`` and ``leases`` (producer names
  held in the metastore).
"""
from __future__ import annotations

from .adapter import SparkAdapter
from .calls import SETTINGS
from .session import (DEFAULT_HOME, LOG4J2, POSTGRESQL_JAR, derby_settings, java_option, local_session, local_settings,
                      metastore_settings, quiet_java_options, spark_defaults)

__all__ = ["DEFAULT_HOME", "LOG4J2", "POSTGRESQL_JAR", "SETTINGS", "SparkAdapter", "derby_settings", "java_option",
           "local_session", "local_settings", "metastore_settings", "quiet_java_options", "spark_defaults"]
