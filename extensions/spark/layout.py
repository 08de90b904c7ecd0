"""A topic's table on disk: the directories seqdedup stages a commit's rows in (``<table>/_seqdedup_commits/<commit>-
<attempt>``), how a partition's directory says whose it is and which commits it holds, and a topic's partitions read
from one listing (``Layout``: what seqdedup published, what another tool registered, what a compaction covered)."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass

from seqdedup.catalog.names import STAGING
from seqdedup.errors import EngineError

def local_path(directory: str) -> str | None:
    """The path of a directory on the local file system, or None for one elsewhere (HDFS, an object store)."""
    if directory.startswith("file:") or directory.startswith("/"):
        return directory.removeprefix("file:")
    return None


def holds_at_most(directory: str, size: int, entries: int) -> bool:
    """Whether the files under a local ``directory``, at every level, hold at most ``size`` bytes in at most
    ``entries`` files and folders: looked at until either is passed, so that knowing a table is small costs at
    most ``entries`` looks. A folder that goes away meanwhile (a compaction's) says no.

    Example:
        >>> import tempfile
        >>> top = tempfile.mkdtemp()
        >>> os.makedirs(f"{top}/_commit=1")
        >>> _ = open(f"{top}/_commit=1/part-0.parquet", "wb").write(b"x" * 100)
        >>> holds_at_most(top, 100, 2), holds_at_most(top, 99, 2), holds_at_most(top, 100, 1)
        (True, False, False)
    """
    looked, total, folders = 0, 0, [directory]
    try:
        while folders:
            with os.scandir(folders.pop()) as found:
                for entry in found:
                    looked += 1
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
                    if looked > entries or total > size:
                        return False
    except OSError:
        return False
    return True


def remove_directory(directory: str) -> None:
    """Delete a directory seqdedup wrote, on a local file system; elsewhere it stays, unread (an orphan)."""
    if local_path(directory):
        shutil.rmtree(local_path(directory), ignore_errors=True)


def staged(value: str, location: str | None) -> bool:
    """Whether a topic's partition ``_commit = value`` is one seqdedup published: a commit number whose directory is
    one seqdedup staged for that commit (``<table>/_seqdedup_commits/<commit>-<attempt>``), or any number where the
    directory is unknown. A tool that inserts into a topic makes its partitions at ``<table>/_commit=<value>``.

    Example:
        >>> staged("3", "file:/w/events/_seqdedup_commits/3-9f2c"), staged("3", "file:/w/events/_commit=3")
        (True, False)
        >>> staged("__HIVE_DEFAULT_PARTITION__", None), staged("30", "/w/events/_seqdedup_commits/3-9f2c")
        (False, False)
    """
    if not value.isdigit():
        return False
    if location is None:
        return True
    staged = staging_name(location)
    return staged is not None and staged[0] == int(value)


def staging_name(location: str) -> tuple[int, str] | None:
    """(commit, attempt) of a directory seqdedup staged for a commit (``<table>/_seqdedup_commits/<commit>-<attempt>``,
    the attempt followed by ``-<n>`` since several drivers may stage one commit), else None.

    Example:
        >>> staging_name("file:/w/events/_seqdedup_commits/42-9f2c-0a1b"), staging_name("/w/events/_commit=3")
        ((42, '9f2c'), None)
    """
    folder, _, name = location.rstrip("/").rpartition("/")
    match = re.fullmatch(r"(\d+)\D([^-]*).*", name)
    return (int(match[1]), match[2]) if match and folder.endswith(f"/{STAGING}") else None


def first_commit(location: str | None) -> int | None:
    """The first commit a compacted partition's directory holds (``<last>-<attempt>-<n>-c<first>``: the commits
    first .. last, the partition's number being the last), else None (one commit's directory, or not seqdedup's).

    Example (the ``<n>`` is random hex, which may look like ``c`` and digits: only a fourth part counts):
        >>> first_commit("/w/events/_seqdedup_commits/40-9f2c-0a1b-c31")
        31
        >>> first_commit("/w/events/_seqdedup_commits/40-9f2c-0a1b") is None
        True
        >>> first_commit("/w/events/_seqdedup_commits/2-None-c1234567")
    """
    if location is None or staging_name(location) is None:
        return None
    parts = location.rstrip("/").rpartition("/")[2].split("-")
    match = re.fullmatch(r"c(\d+)", parts[3]) if len(parts) == 4 else None
    return int(match[1]) if match else None


def attempt_of(unit: "Unit") -> str:
    """The attempt a partition's directory names (a new one if it has none, as a foreign tool's)."""
    staged = staging_name(unit.location) if unit.location else None
    return staged[1] if staged else uuid.uuid4().hex


def remove_unread(table_location: str, partitions: list["Unit"], older_than: float = 0.0) -> None:
    """Remove the staging directories of a topic that none of its ``partitions`` reads, numbered at or below its
    last published commit: nothing will ever read them (a commit above it may be staging now). With ``older_than``,
    only those last changed that many seconds ago or more: a query of another driver that listed the partitions
    before a compaction switched them may still be reading the old ones. On a local file system only."""
    root = local_path(f"{table_location}/{STAGING}")
    if root is None or not os.path.isdir(root):
        return
    top = max(unit.last for unit in partitions)
    read = {unit.location.rstrip("/").rpartition("/")[2] for unit in partitions if unit.location}
    before = time.time() - older_than
    for name in os.listdir(root):
        staged = staging_name(f"{root}/{name}")
        if staged is not None and staged[0] <= top and name not in read:
            with contextlib.suppress(OSError):       # (another driver removed it first)
                if older_than and os.stat(f"{root}/{name}").st_mtime > before:
                    continue
                shutil.rmtree(f"{root}/{name}")


def covered_since(unit: "Unit") -> float:
    """When a compaction pointed a partition it merged at an empty directory (``...-e<seconds>``, Unix time); 0 for
    one a version before the time was named did (old enough to drop).

    Example:
        >>> [covered_since(Unit(3, 3, f"/w/t/_seqdedup_commits/3-9f2c-0a1b-{e}")) for e in ("e1764400000", "e")]
        [1764400000.0, 0.0]
    """
    match = re.search(r"-e(\d+)$", (unit.location or "").rstrip("/"))
    return float(match[1]) if match else 0.0


@dataclass(frozen=True)
class Unit:
    """One partition of a topic that seqdedup published: the commits first .. last (one, unless compacted)."""

    first: int
    last: int                       # the partition's ``_commit`` value
    location: str | None

    @property
    def commits(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class Layout:
    """A topic's partitions, read from one listing: what seqdedup published, what another tool registered, and the
    partitions a compaction merged into another but has not dropped yet (it was killed in between, or is in between
    now): their rows are also in the merged partition, so no read counts them."""

    units: list[Unit]              # seqdedup's partitions, by commit, without the covered ones
    foreign: list[str]              # the ``_commit`` values of the partitions another tool registered
    covered: list[Unit]            # partitions merged into one of ``units`` and not dropped yet

    @property
    def published(self) -> set[int]:
        return {n for unit in self.units for n in range(unit.first, unit.last + 1)}

    @classmethod
    def of(cls, partitions: list[tuple[str, str | None]]) -> "Layout":
        foreign = [value for value, location in partitions if not staged(value, location)]
        units = sorted((Unit(first_commit(location) or int(value), int(value), location)
                        for value, location in partitions if staged(value, location)), key=lambda u: u.last)
        merged = [u for u in units if u.commits > 1]
        covered = [u for u in units if any(m.first <= u.last < m.last for m in merged)]
        return cls([u for u in units if u not in covered], foreign, covered)


def listed_partitions(text: str, count: int) -> list[tuple[str, str | None]]:
    """(value, directory) of each of ``count`` partitions of a table partitioned by one column, from the text of
    Spark's catalog entries for them (one call to the JVM for them all; a call per partition costs milliseconds).

    Example:
        >>> listed_partitions("CatalogPartition(\\n\\tPartition Values: [_commit=1]\\n\\tLocation: file:/t/1-a\\n"
        ...                    "\\tSerde Library: x)\\nCatalogPartition(\\n\\tPartition Values: [_commit=2]\\n)", 2)
        [('1', 'file:/t/1-a'), ('2', None)]
    """
    found = [(value, location or None) for value, location in re.findall(
        r"^\tPartition Values: \[[^=\]]*=(.*)\]\n(?:\tLocation: (.*)$)?", text, re.M)]
    if len(found) != count:
        raise EngineError(f"seqdedup could not read the partitions of a topic from Spark's catalog (found {len(found)} "
                          f"of {count}); this Spark version writes them differently: report it, with the version")
    return found

