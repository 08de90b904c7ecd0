"""The storage protocol on Spark (extensions/storage.py): a Hive partition per commit. Each method is carried out by
one of the adapter's collaborators: ``TableFiles`` (tables made, dropped and refreshed, rows deleted), ``Partitions``
(the metastore's listing), ``Commits`` (stage, publish, the commits visible, the winners), ``Compaction``, and
``Quarantine`` (rows another tool wrote)."""
from __future__ import annotations

from ..storage import by
from .commits import Commits
from .compaction import Compaction
from .files import TableFiles
from .partitions import Partitions
from .quarantine import Quarantine


class SparkStorage:
    """``adapter.storage`` on Spark: the protocol's methods, each the collaborator's that does it."""

    def __init__(self, adapter):
        self.adapter = adapter

    create_topic_table = by("adapter.files", TableFiles.create_topic_table)
    create_catalog_table = by("adapter.files", TableFiles.create_catalog_table)
    delete_rows = by("adapter.files", TableFiles.delete_rows)
    drop_topic_table = by("adapter.files", TableFiles.drop_topic_table)
    refresh = by("adapter.files", TableFiles.refresh)
    listed_once = by("adapter.partitions", Partitions.listed_once)
    open_commit = by("adapter.commits", Commits.open)
    attempt = by("adapter.commits", Commits.attempt)
    write_topic = by("adapter.commits", Commits.write)
    write_decided = by("adapter.commits", Commits.write_decided)
    discard_commit_rows = by("adapter.commits", Commits.discard)
    staged_rows = by("adapter.commits", Commits.staged_rows)
    staged_keys = by("adapter.commits", Commits.staged_keys)
    staged_files = by("adapter.commits", Commits.staged_files)
    stages_apart = by("adapter.commits", Commits.stages_apart)
    dropped_rows = by("adapter.commits", Commits.dropped_rows)
    dropped_files = by("adapter.commits", Commits.dropped_files)
    publish = by("adapter.commits", Commits.publish)
    close_commit = by("adapter.commits", Commits.close)
    published_commits = by("adapter.commits", Commits.published)
    last_published_commit = by("adapter.commits", Commits.last_published)
    visible_commits = by("adapter.commits", Commits.visible)
    beside_winners = by("adapter.commits", Commits.beside_winners)
    partition_ranges = by("adapter.compaction", Compaction.ranges)
    drop_merged = by("adapter.compaction", Compaction.drop_merged)
    merge_partitions = by("adapter.compaction", Compaction.merge)
    foreign_partitions = by("adapter.quarantine", Quarantine.foreign)
    own_rows = by("adapter.quarantine", Quarantine.own_rows)
    move_foreign_rows = by("adapter.quarantine", Quarantine.move)
