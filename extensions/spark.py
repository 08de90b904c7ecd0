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
catalog rows whose commit is not published, which every read leaves out (``visible_commits``).

A partition whose directory seqdedup did not stage (a plain INSERT into the table makes one) is foreign: never a
published commit, its number never taken, its rows left out of every read (``_staged``, seqdedup/foreign.py).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import logging
import os
import random
import re
import shutil
import sys
import threading
import time
import urllib.parse
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import sqlglot
from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL, SCRATCH, STAGING
from seqdedup.catalog.schema import (COMMITS, FOREIGN_COLUMNS, IN_CATALOG, arrow_schema, catalog_table,
                                     create_table, foreign_commits, written_by_seqdedup)
from seqdedup.catalog.state import literal

from seqdedup.errors import CatalogError, CommitConflict, EngineError, TopicError, already_exists
from seqdedup.failpoints import failpoint
from seqdedup.sql.dialects import SparkAnsi
from seqdedup.udfs.guards import SIGNATURES, guard_message

from .base import Decided, EngineAdapter
from .spark_guards import guard_function, guard_jar

log = logging.getLogger("seqdedup.compaction")

#: Where a local session keeps its warehouse and Derby metastore, unless told otherwise.
DEFAULT_HOME = "seqdedup-spark"


def local_session(home: str | Path = DEFAULT_HOME, master: str = "local[2]", lock_timeout: float | None = 60.0,
                  metastore: str | None = None):
    """A local SparkSession with a Hive catalog: the warehouse in ``home``, the metastore an embedded Derby database
    there, or ``metastore`` (see ``metastore_settings``) shared with other drivers.

    Embedded Derby admits one process per metastore: a second one logs thousands of lines and hangs until the
    first ends. So the home is locked for this process first, waiting at most ``lock_timeout`` seconds for another
    process to let it go, then an EngineError that names that process. With a shared metastore nothing is locked:
    drivers publish their commits by compare-and-set in the metastore (docs/engines/spark.md).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers must run this Python, with pyarrow
    from pyspark.sql import SparkSession

    home = Path(home).resolve()
    settings = None if metastore is None else metastore_settings(metastore)    # (a bad URL: before any folder)
    home.mkdir(parents=True, exist_ok=True)
    if settings is None:
        _lock_home(home, lock_timeout)
        settings = derby_settings(home)
    else:
        if POSTGRESQL_JAR in os.environ.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep):
            # already at the end of the class path: added in front too, it would change the class path that a
            # class-data archive was written for (tests/jvm.py), and the JVM would start without the archive
            del settings["spark.driver.extraClassPath"]
    builder = (
        SparkSession.builder.master(master).appName("seqdedup").enableHiveSupport()
        .config("spark.ui.showConsoleProgress", "false")
        # Replays prune topic partitions by ``_commit >= n``; Derby cannot evaluate that filter in the metastore,
        # so Spark fetches the partition list and prunes it itself.
        .config("spark.sql.hive.metastorePartitionPruningFallbackOnException", "true")
    )
    # Errors only, from the JVM's start (setLogLevel below takes over once Spark is up), unless the user chose a log4j
    # configuration; after spark-defaults.conf's Java options, which the builder's would replace.
    options = " ".join(filter(None, [spark_defaults().get("spark.driver.extraJavaOptions", ""),
                                     settings.get("spark.driver.extraJavaOptions", "")]))
    options = quiet_java_options(options)
    if options:
        settings["spark.driver.extraJavaOptions"] = options
    for key, value in {**local_settings(home), **settings}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def local_settings(home: Path) -> dict[str, str]:
    """The settings of a local session seqdedup starts (``local_session``, the local Spark Connect server), its
    metastore's aside: no web UI, two shuffle partitions (small data, two cores), and its files in ``home``."""
    return {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
            # With the UI off, Spark still renders each query's physical plan for its listeners, by default in the
            # 'formatted' mode, the costliest: about 7 % of the driver's CPU in the behaviour suite (sampled with
            # Java Flight Recorder), where 'simple' takes about 4 % less of the JVM's CPU in all.
            "spark.sql.ui.explainMode": "simple",
            "spark.sql.warehouse.dir": str(home / "warehouse"),
            # Hive's session makes a folder for downloaded resources, by default <tmp>/<session id>_resources, which
            # only the close of Hive's session removes, and Spark never closes it: an empty folder left in /tmp by
            # every process.
            "spark.hadoop.hive.downloaded.resources.dir": str(home / "hive-resources")}


def java_option(name: str, value: object) -> str:
    """``-Dname=value`` for ``spark.driver.extraJavaOptions``, which Spark's launcher splits as a shell would: a
    space or quote in the value, escaped, stays in it.

    Example:
        >>> print(java_option("derby.system.home", "/data/spark home"))
        -Dderby.system.home=/data/spark\\ home
    """
    return re.sub(r"""([\s'"\\])""", r"\\\1", f"-D{name}={value}")


#: The log4j2 configuration of the Spark drivers seqdedup starts in the user's process (``quiet_java_options``).
LOG4J2 = Path(__file__).with_name("spark-log4j2.properties")
#: A Java option or setting that names a log4j configuration: log4j2's ``log4j2.configurationFile``, its older
#: spelling ``log4j.configurationFile``, log4j 1's ``log4j.configuration``.
_LOG4J_OPTION = re.compile(r"log4j2?\.configuration", re.I)
#: The names log4j2 looks for on the class path (Spark's configuration folder is on it).
_LOG4J_FILE = re.compile(r"log4j2(-test)?\.(properties|xml|json|jsn|ya?ml)")


def quiet_java_options(options: str = "", chosen: str = "") -> str:
    """``spark.driver.extraJavaOptions`` for a driver seqdedup starts: ``options`` with seqdedup's log4j2
    configuration (spark-log4j2.properties) added, which logs errors only from the JVM's start, where Spark's
    defaults print WARN lines before ``spark.log.level`` applies. ``options`` stay as they are where the user has
    chosen a log4j configuration (``user_log4j`` of ``options`` and ``chosen``, the user's other Java options).

    Example:
        >>> quiet_java_options("-Dlog4j2.configurationFile=/etc/spark/log4j2.xml")
        '-Dlog4j2.configurationFile=/etc/spark/log4j2.xml'
    """
    if user_log4j(f"{options} {chosen}"):
        return options
    return f"{options} {java_option('log4j2.configurationFile', LOG4J2.as_uri())}".strip()


def user_log4j(options: str = "") -> bool:
    """Whether the user has chosen a log4j configuration for the driver: in ``options`` (their
    ``spark.driver.extraJavaOptions`` and ``defaultJavaOptions``), in the environment (``LOG4J_CONFIGURATION_FILE``,
    or Java's and Spark's options: ``JAVA_TOOL_OPTIONS``, ``JDK_JAVA_OPTIONS``, ``SPARK_SUBMIT_OPTS``,
    ``PYSPARK_SUBMIT_ARGS``), or in Spark's configuration folder (``spark_conf_dir``): a ``log4j2.properties`` (or
    .xml, ...), or a ``spark-defaults.conf`` that names one."""
    if _LOG4J_OPTION.search(options) or os.environ.get("LOG4J_CONFIGURATION_FILE"):
        return True
    names = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS", "PYSPARK_SUBMIT_ARGS")
    if any(_LOG4J_OPTION.search(os.environ.get(name, "")) for name in names):
        return True
    with contextlib.suppress(OSError):
        if any(_LOG4J_FILE.fullmatch(path.name) for path in spark_conf_dir().iterdir()):
            return True
    return any(_LOG4J_OPTION.search(value) for value in spark_defaults().values())


def spark_conf_dir() -> Path:
    """Spark's configuration folder, as pyspark's launcher finds it: ``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``,
    else pyspark's own (a pip install's ``SPARK_HOME``)."""
    if os.environ.get("SPARK_CONF_DIR"):
        return Path(os.environ["SPARK_CONF_DIR"])
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "conf"


def spark_defaults() -> dict[str, str]:
    """The settings of ``spark-defaults.conf`` in Spark's configuration folder (none where it has none), read as a
    Java properties file (``key value``, ``key=value``), but for continued lines. A setting given to the session's
    builder replaces the file's: a driver seqdedup starts keeps the file's Java options by adding its own to them."""
    try:
        text = (spark_conf_dir() / "spark-defaults.conf").read_text(errors="replace")
    except OSError:
        return {}
    lines = (line.strip() for line in text.splitlines())
    pairs = (re.match(r"([^\s=:]+)\s*[\s=:]\s*(.*)", line) for line in lines if line and line[0] not in "#!")
    return {pair.group(1): pair.group(2).strip() for pair in pairs if pair}


def derby_settings(home: Path) -> dict[str, str]:
    """An embedded Derby metastore in ``home`` (one process at a time)."""
    url = f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true"
    return {"spark.hadoop.javax.jdo.option.ConnectionURL": url,
            "spark.driver.extraJavaOptions": java_option("derby.system.home", home)}


#: Where Debian's libpostgresql-jdbc-java puts PostgreSQL's JDBC driver.
POSTGRESQL_JAR = "/usr/share/java/postgresql.jar"


def metastore_settings(metastore: str) -> dict[str, str]:
    """The Spark settings for a shared Hive metastore: a metastore service (``thrift://host:9083``), or the
    metastore's database itself (``jdbc:postgresql://host:port/db?user=u&password=p``; Debian's JDBC driver).

    Example:
        >>> settings = metastore_settings("jdbc:postgresql://127.0.0.1:5432/metastore?user=hive&password=s")
        >>> settings["spark.hadoop.javax.jdo.option.ConnectionUserName"], settings["spark.driver.extraClassPath"]
        ('hive', '/usr/share/java/postgresql.jar')
    """
    if metastore.startswith("thrift://"):
        return {"spark.hadoop.hive.metastore.uris": metastore}
    if not metastore.startswith("jdbc:postgresql:"):
        raise EngineError(f"unknown metastore {metastore!r}: give a metastore service's thrift://host:port, or a "
                          "PostgreSQL metastore database's jdbc:postgresql://host:port/db?user=...&password=...; "
                          "for any other, configure your SparkSession yourself and pass it to seqdedup.connect")
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(metastore.removeprefix("jdbc:")).query)
    return {"spark.hadoop.javax.jdo.option.ConnectionURL": metastore,
            "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "spark.hadoop.javax.jdo.option.ConnectionUserName": query.get("user", [""])[0],
            "spark.hadoop.javax.jdo.option.ConnectionPassword": query.get("password", [""])[0],
            "spark.hadoop.datanucleus.schema.autoCreateAll": "false",     # create_schema made it, whole,
            "spark.hadoop.hive.metastore.schema.verification": "false",   # without Hive's version row
            "spark.driver.extraClassPath": POSTGRESQL_JAR}


#: The homes this process holds, path -> the open lock file (a lock lives as long as its file stays open).
_homes: dict[Path, object] = {}
#: (warehouse, default namespace) -> table -> its directory (``SparkAdapter._locations``)
_LOCATIONS: dict[tuple[str, str], dict[str, str]] = {}
#: The SparkSessions seqdedup's temporary functions are registered in (they live as long as the session): a second
#: ``connect`` on one session does not register them again.
_REGISTERED: "weakref.WeakSet" = weakref.WeakSet()


def _lock_home(home: Path, timeout: float | None) -> None:
    if home in _homes:
        return
    file = open(home / "seqdedup.lock", "a+")
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.05
    while True:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if deadline is not None and time.monotonic() + pause > deadline:
                file.seek(0)
                holder = file.read().strip() or "another process"
                file.close()
                raise EngineError(f"the Spark home {home} is in use by {holder} (waited {timeout} s for it): its "
                                  "embedded Derby metastore admits one process at a time; stop the other process, "
                                  "use another home, or connect with a longer lock_timeout") from None
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
    file.truncate(0)
    file.write(f"process {os.getpid()}")
    file.flush()
    _homes[home] = file


#: Up to this many rows, a relation made from Arrow is an inline table in the query (see ``SparkAdapter.relation``).
INLINE_ROWS = 64


def _local(directory: str) -> str | None:
    """The path of a directory on the local file system, or None for one elsewhere (HDFS, an object store)."""
    if directory.startswith("file:") or directory.startswith("/"):
        return directory.removeprefix("file:")
    return None


def _remove(directory: str) -> None:
    """Delete a directory seqdedup wrote, on a local file system; elsewhere it stays, unread (an orphan)."""
    if _local(directory):
        shutil.rmtree(_local(directory), ignore_errors=True)

#: What a Java cause of a failed write says when the disk is full (ENOSPC, EFBIG past a file size limit, EDQUOT),
#: and when this process may not write where the warehouse is (EACCES, EROFS, or Hadoop's own words for them).
DISK_FULL = ("No space left on device", "File too large", "Disk quota exceeded")
NOT_WRITABLE = ("Permission denied", "Read-only file system", "Mkdirs failed", "unable to create one")


def _causes(error: Exception) -> list[str]:
    """The first line of a Spark error, then of every Java exception behind it, outermost first (a full disk is
    often several causes deep, under a generic task or job failure)."""
    texts = [str(error)]
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    with contextlib.suppress(Exception):    # a JVM that is gone answers nothing more
        while java is not None and len(texts) < 30:
            texts.append(str(java.toString()))
            java = java.getCause()
    return [text.strip().splitlines()[0] if text.strip() else type(error).__name__ for text in texts]


def _engine_error(error: Exception) -> EngineError:
    """An EngineError that names the problem and the fix, for a PySpark error or a failed Java job.

    Example:
        >>> text = str(_engine_error(Exception("[PARTITIONS_ALREADY_EXIST] Cannot ADD or RENAME TO partition(s) "
        ...                                    "PARTITION (`_commit` = 3) in table `db`.`events`")))
        >>> text.split(":")[0], "Nothing was published; run the statement again" in text
        ('the commit could not be published', True)
    """
    causes = _causes(error)
    for cause in reversed(causes):           # the innermost cause says it best
        if any(words in cause for words in DISK_FULL):
            return EngineError(f"the disk is full: Spark could not write a file ({cause}); free space (or raise the "
                               "file size limit, ulimit -f), then run the statement again: seqdedup publishes a "
                               "commit only once all its files are written, so a retry writes each entry once")
    for cause in reversed(causes):
        if any(words in cause for words in NOT_WRITABLE):
            return EngineError(f"Spark may not write to the warehouse ({cause}); make its folder writable by this "
                               "user, or connect with read_only=True to only read")
    if "PARTITIONS_ALREADY_EXIST" in causes[0] and "_commit" in causes[0]:
        return EngineError(f"the commit could not be published: its partition exists already ({causes[0]}), "
                           "registered by a tool other than this seqdedup session (an INSERT into the topic's table "
                           "on Spark itself, or another writer). Nothing was published; run the statement again: "
                           "seqdedup recovers the topic and numbers the commit past that partition (docs/engines/"
                           "spark.md, foreign rows)")
    # A failed Java job (a Py4JJavaError) says only which call failed; its Java exception says why.
    return EngineError(f"Spark: {causes[1] if hasattr(error, 'java_exception') and len(causes) > 1 else causes[0]}")


def _staged(value: str, location: str | None) -> bool:
    """Whether a topic's partition ``_commit = value`` is one seqdedup published: a commit number whose directory is
    one seqdedup staged for that commit (``<table>/_seqdedup_commits/<commit>-<attempt>``), or any number where the
    directory is unknown. A tool that inserts into a topic makes its partitions at ``<table>/_commit=<value>``.

    Example:
        >>> _staged("3", "file:/w/events/_seqdedup_commits/3-9f2c"), _staged("3", "file:/w/events/_commit=3")
        (True, False)
        >>> _staged("__HIVE_DEFAULT_PARTITION__", None), _staged("30", "/w/events/_seqdedup_commits/3-9f2c")
        (False, False)
    """
    if not value.isdigit():
        return False
    if location is None:
        return True
    staged = _staging_name(location)
    return staged is not None and staged[0] == int(value)


def _staging_name(location: str) -> tuple[int, str] | None:
    """(commit, attempt) of a directory seqdedup staged for a commit (``<table>/_seqdedup_commits/<commit>-<attempt>``,
    the attempt followed by ``-<n>`` since several drivers may stage one commit), else None.

    Example:
        >>> _staging_name("file:/w/events/_seqdedup_commits/42-9f2c-0a1b"), _staging_name("/w/events/_commit=3")
        ((42, '9f2c'), None)
    """
    folder, _, name = location.rstrip("/").rpartition("/")
    match = re.fullmatch(r"(\d+)\D([^-]*).*", name)
    return (int(match[1]), match[2]) if match and folder.endswith(f"/{STAGING}") else None


def _first_commit(location: str | None) -> int | None:
    """The first commit a compacted partition's directory holds (``<last>-<attempt>-<n>-c<first>``: the commits
    first .. last, the partition's number being the last), else None (one commit's directory, or not seqdedup's).

    Example (the ``<n>`` is random hex, which may look like ``c`` and digits: only a fourth part counts):
        >>> _first_commit("/w/events/_seqdedup_commits/40-9f2c-0a1b-c31"), _first_commit("/w/events/_seqdedup_commits/40-9f2c-0a1b")
        (31, None)
        >>> _first_commit("/w/events/_seqdedup_commits/2-None-c1234567")
    """
    if location is None or _staging_name(location) is None:
        return None
    parts = location.rstrip("/").rpartition("/")[2].split("-")
    match = re.fullmatch(r"c(\d+)", parts[3]) if len(parts) == 4 else None
    return int(match[1]) if match else None


def _attempt_of(unit: "_Unit") -> str:
    """The attempt a partition's directory names (a new one if it has none, as a foreign tool's)."""
    staged = _staging_name(unit.location) if unit.location else None
    return staged[1] if staged else uuid.uuid4().hex


_STORAGE_FIELDS: int | None = None      # see _storage_fields


def _storage_fields(storage) -> int:
    """The fields of Spark's CatalogStorageFormat (the arguments of its ``copy``), looked up once per process."""
    global _STORAGE_FIELDS
    if _STORAGE_FIELDS is None:
        _STORAGE_FIELDS = len(next(m for m in storage.getClass().getMethods()
                                   if m.getName() == "copy").getParameterTypes())
    return _STORAGE_FIELDS


def _java(spark, name: str):
    """The JVM class ``name`` (a full name) of a classic session's JVM."""
    return _java_class(spark._jvm._gateway_client, name)


@functools.lru_cache(maxsize=64)
def _java_class(client, name: str):
    # Looked up once: py4j resolves ``jvm.org.apache.x.Y`` a segment at a time, a round trip each, and each segment
    # that is not a class is a class lookup that fails only after searching every jar. A small statement made 81
    # lookups through py4j, now 38 (pyspark's own).
    from py4j.java_gateway import JavaClass

    return JavaClass(name, client)


def _storage_at(spark, storage, location: str):
    """A copy of Spark's storage format of a table or partition, at another directory (the other fields, whatever
    this Spark version has, kept as they are)."""
    # (``location`` as Spark writes a directory, a space or a '%' as is: Spark's own parse encodes them)
    uri = _java(spark, "org.apache.spark.sql.catalyst.catalog.CatalogUtils").stringToURI(location)
    return storage.copy(_java(spark, "scala.Option").apply(uri),
                        *[getattr(storage, f"copy$default${i}")() for i in range(2, _storage_fields(storage) + 1)])


def _with_location(spark, partition, location: str):
    """A copy of Spark's catalog entry for a partition, with another directory."""
    return partition.copy(partition.spec(), _storage_at(spark, partition.storage(), location), partition.parameters(),
                          partition.createTime(), partition.lastAccessTime(), partition.stats())


def _remove_unread(table_location: str, partitions: list["_Unit"], older_than: float = 0.0) -> None:
    """Remove the staging directories of a topic that none of its ``partitions`` reads, numbered at or below its
    last published commit: nothing will ever read them (a commit above it may be staging now). With ``older_than``,
    only those last changed that many seconds ago or more: a query of another driver that listed the partitions
    before a compaction switched them may still be reading the old ones. On a local file system only."""
    root = _local(f"{table_location}/{STAGING}")
    if root is None or not os.path.isdir(root):
        return
    top = max(unit.last for unit in partitions)
    read = {unit.location.rstrip("/").rpartition("/")[2] for unit in partitions if unit.location}
    before = time.time() - older_than
    for name in os.listdir(root):
        staged = _staging_name(f"{root}/{name}")
        if staged is not None and staged[0] <= top and name not in read:
            with contextlib.suppress(OSError):       # (another driver removed it first)
                if older_than and os.stat(f"{root}/{name}").st_mtime > before:
                    continue
                shutil.rmtree(f"{root}/{name}")


#: What Hive's metastore says when another driver drops or moves a topic's partitions while this one lists or drops
#: them (a compaction): a partition gone between Spark's look and Hive's drop, a partition whose rows vanished
#: while listed (``Table.createSpec`` on an empty list), a row deleted under a metastore transaction.
MOVED_UNDER = ("Partition or table doesn't exist", "NoSuchObjectException", "No such database row",
               "IndexOutOfBoundsException: Index 0 out of bounds for length 0")
#: Tries of a listing that another driver changed meanwhile, and the most seconds between them.
MOVED_TRIES, MOVED_WAIT = 5, 0.5


def _moved_under(error: Exception) -> bool:
    """Whether ``error`` is one of MOVED_UNDER.

    Example:
        >>> _moved_under(EngineError("Spark: org.apache.hadoop.hive.ql.metadata.HiveException: Partition or table "
        ...                          "doesn't exist."))
        True
    """
    return any(words in str(error) for words in MOVED_UNDER)


def _covered_since(unit: "_Unit") -> float:
    """When a compaction pointed a partition it merged at an empty directory (``...-e<seconds>``, Unix time); 0 for
    one a version before the time was named did (old enough to drop).

    Example:
        >>> [_covered_since(_Unit(3, 3, f"/w/t/_seqdedup_commits/3-9f2c-0a1b-{e}")) for e in ("e1764400000", "e")]
        [1764400000.0, 0.0]
    """
    match = re.search(r"-e(\d+)$", (unit.location or "").rstrip("/"))
    return float(match[1]) if match else 0.0


def _changed_under(topic) -> TopicError:
    """The error of a compaction that finds the partitions it planned to merge changed (another one ran)."""
    return TopicError(f"the partitions of {topic.key} changed while it was being compacted (another compaction "
                      "ran): run the compaction again")


@dataclass(frozen=True)
class _Unit:
    """One partition of a topic that seqdedup published: the commits first .. last (one, unless compacted)."""

    first: int
    last: int                       # the partition's ``_commit`` value
    location: str | None

    @property
    def commits(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class _Layout:
    """A topic's partitions, read from one listing: what seqdedup published, what another tool registered, and the
    partitions a compaction merged into another but has not dropped yet (it was killed in between, or is in between
    now): their rows are also in the merged partition, so no read counts them."""

    units: list[_Unit]              # seqdedup's partitions, by commit, without the covered ones
    foreign: list[str]              # the ``_commit`` values of the partitions another tool registered
    covered: list[_Unit]            # partitions merged into one of ``units`` and not dropped yet

    @property
    def published(self) -> set[int]:
        return {n for unit in self.units for n in range(unit.first, unit.last + 1)}

    @classmethod
    def of(cls, partitions: list[tuple[str, str | None]]) -> "_Layout":
        foreign = [value for value, location in partitions if not _staged(value, location)]
        units = sorted((_Unit(_first_commit(location) or int(value), int(value), location)
                        for value, location in partitions if _staged(value, location)), key=lambda u: u.last)
        merged = [u for u in units if u.commits > 1]
        covered = [u for u in units if any(m.first <= u.last < m.last for m in merged)]
        return cls([u for u in units if u not in covered], foreign, covered)


def _listed_partitions(text: str, count: int) -> list[tuple[str, str | None]]:
    """(value, directory) of each of ``count`` partitions of a table partitioned by one column, from the text of
    Spark's catalog entries for them (one call to the JVM for them all; a call per partition costs milliseconds).

    Example:
        >>> _listed_partitions("CatalogPartition(\\n\\tPartition Values: [_commit=1]\\n\\tLocation: file:/t/1-a\\n"
        ...                    "\\tSerde Library: x)\\nCatalogPartition(\\n\\tPartition Values: [_commit=2]\\n)", 2)
        [('1', 'file:/t/1-a'), ('2', None)]
    """
    found = [(value, location or None) for value, location in re.findall(
        r"^\tPartition Values: \[[^=\]]*=(.*)\]\n(?:\tLocation: (.*)$)?", text, re.M)]
    if len(found) != count:
        raise EngineError(f"seqdedup could not read the partitions of a topic from Spark's catalog (found {len(found)} "
                          f"of {count}); this Spark version writes them differently: report it, with the version")
    return found


def _writes(statement: exp.Expression | str) -> bool:
    """Whether a statement changes stored data (a read, or a temporary view or function, does not).

    Example:
        >>> _writes("CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1"), _writes("INSERT INTO t SELECT 1")
        (False, True)
    """
    if isinstance(statement, str):
        try:
            statement = sqlglot.parse_one(statement, read=SparkAnsi)
        except sqlglot.errors.ParseError:
            return True
    if isinstance(statement, (exp.Query, exp.Describe, exp.Show, exp.Use, exp.Set)):
        return False
    if isinstance(statement, exp.Command):   # what sqlglot does not parse: SHOW ..., EXPLAIN ... read
        return str(statement.this).upper() not in ("SHOW", "EXPLAIN")
    if isinstance(statement, exp.Create):
        properties = statement.args.get("properties")
        return not (properties and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions))
    if isinstance(statement, exp.Drop):
        return not statement.args.get("temporary")
    return True


#: Runtime SQL settings seqdedup's Spark calls need, whatever session they run on: a user's own session may lack
#: them, and seqdedup sets them on it only while one of its calls runs (``_settings``), then puts back what it found.
SETTINGS = {
    # A replay prunes a topic's partitions by ``_commit >= n``, a filter an embedded Derby metastore cannot evaluate
    # on a BIGINT partition column (INTERNAL_ERROR_HIVE_METASTORE_PARTITION_FILTER); Spark then lists the
    # partitions and prunes them itself.
    "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
    # seqdedup reads and writes Spark SQL in ANSI mode (sql/dialects.py): a bad cast or an overflow fails, as on
    # DuckDB, rather than giving NULL.
    "spark.sql.ansi.enabled": "true",
}


@dataclass
class _Held:
    """SETTINGS as seqdedup holds them on one SparkSession."""

    calls: int = 0                                  # seqdedup's Spark calls running on the session now
    found: dict = field(default_factory=dict)       # setting -> the session's value before them (None: unset)


_held: dict[int, _Held] = {}        # id(SparkSession) -> what seqdedup holds on it
_held_lock = threading.Lock()


@contextlib.contextmanager
def _settings(spark) -> Iterator[None]:
    """SETTINGS on ``spark`` while one of seqdedup's calls runs on it, from any thread or adapter: the first call in
    sets those the session lacks, the last one out puts back what it found (unsets what was unset)."""
    conf = spark.conf
    with _held_lock:
        held = _held.setdefault(id(spark), _Held())
        if not held.calls:
            lacking = {key: value for (key, value), now in zip(SETTINGS.items(), _values(spark, list(SETTINGS)))
                       if now != value}
            explicit = conf.getAll if lacking else {}      # (a session seqdedup started has them all)
            held.found = {key: explicit.get(key) for key in lacking}
            for key, value in lacking.items():
                conf.set(key, value)
        held.calls += 1
    try:
        yield
    finally:
        with _held_lock:
            held.calls -= 1
            if not held.calls:
                for key, value in held.found.items():
                    conf.unset(key) if value is None else conf.set(key, value)


def _values(spark, keys: list[str]) -> tuple:
    """The session's values of the settings ``keys``: one request on Spark Connect, where ``conf.get`` is one each
    (``_settings`` asks at each of seqdedup's calls)."""
    client = getattr(spark, "client", None) if _remote(spark) else None
    if hasattr(client, "get_configs"):
        return client.get_configs(*keys)
    return tuple(spark.conf.get(key) for key in keys)


def _refuse_without_hive(spark) -> None:
    """Refuse a session whose catalog is not Hive's (``spark.sql.catalogImplementation``, a static setting, readable
    from a classic session and a Spark Connect client alike), before seqdedup makes anything in it.

    Spark's in-memory catalog cannot hold seqdedup's state: it refuses the Hive-format tables seqdedup makes on a
    session that is not its own (NOT_SUPPORTED_COMMAND_WITHOUT_HIVE_SUPPORT, after the catalog table's folder was
    made), and its tables end with the session while their folders stay, where a later session's CREATE TABLE of the
    same name fails with LOCATION_ALREADY_EXISTS: topics and their state would outlive none of it.
    """
    catalog = spark.conf.get("spark.sql.catalogImplementation")
    if catalog == "hive":
        return
    if _remote(spark):
        fix = ("start the Spark Connect server with --conf spark.sql.catalogImplementation=hive, or let seqdedup "
               "start a local server with a Hive catalog: seqdedup connect-server")
    else:
        fix = ("build the session with SparkSession.builder.enableHiveSupport(), or let seqdedup start a local "
               'session with a Hive catalog: seqdedup.connect(engine="spark")')
    raise EngineError(f"seqdedup needs a SparkSession with a Hive catalog, and this one's catalog is {catalog!r} "
                      "(spark.sql.catalogImplementation): topics and their state are partitioned tables that must "
                      "outlive the session, and Spark's in-memory catalog forgets them when it ends. To fix it, "
                      f"{fix}. Nothing was created.")


def _unregistered_catalog(table: exp.Table, error: EngineError) -> CatalogError:
    """The warehouse holds a catalog table's files that this session's metastore does not know: the home's tables
    were registered in another metastore (a shared one), or its own metastore_db was deleted."""
    folder = re.search(r"location [`']?(?:file:)?(.+?)[`']? already exists", str(error))
    return CatalogError(
        f"the warehouse holds seqdedup's catalog table {table.name} ({folder[1] if folder else 'its folder'}), but "
        "this session's metastore does not know it: the tables were registered in another metastore. Where the "
        "drivers share one, give it: --metastore URL (or SEQDEDUP_METASTORE) on the command line, "
        "local_session(home, metastore=URL) in Python. Where this home's own metastore_db was deleted or not copied, "
        "restore it; the files alone do not make a catalog")


def _not_found(error, table: exp.Table) -> bool:
    """Whether a Spark error says that ``table`` itself does not exist (not a table or view it reads)."""
    return error.getCondition() == "TABLE_OR_VIEW_NOT_FOUND" and \
        _names(error.getMessageParameters().get("relationName", ""), table)


def _names(relation: str, table: exp.Table) -> bool:
    """Whether a relation's name as Spark's errors write it is ``table``'s (Hive names are letters, digits and _).

    Example:
        >>> _names("`default`.`Events`", exp.to_table("default.events")), _names("`default`.`t`", exp.to_table("u"))
        (True, False)
    """
    parts = [part.name.lower() for part in table.parts]
    return relation.replace("`", "").lower().split(".")[-len(parts):] == parts


def _remote(thing) -> bool:
    """Whether a SparkSession or DataFrame is Spark Connect's (a client's: no JVM in this process)."""
    return type(thing).__module__.startswith("pyspark.sql.connect")


def _same_session(one, other) -> bool:
    """Whether two SparkSessions are one: the same Connect session, or the same session of one JVM (two Python
    objects may wrap it)."""
    if _remote(one) != _remote(other):
        return False
    if _remote(one):
        return one.session_id == other.session_id
    return one is other or one._jsparkSession.equals(other._jsparkSession)


def _functions(spark):
    """pyspark's functions for this kind of session: in a process that holds no classic SparkContext, the classic
    module's functions fail (and a process may hold both kinds)."""
    if _remote(spark):
        from pyspark.sql.connect import functions
    else:
        from pyspark.sql import functions
    return functions


def _as_spark_binds(rows):
    """An Arrow table whose naive timestamps are instants read as pyspark reads a naive ``datetime`` it binds to a
    parameter: in this process's local time (``datetime.astimezone``), whatever the session's time zone."""
    import datetime as dt

    import pyarrow.compute as pc

    for i, column_field in enumerate(rows.schema):
        if pa.types.is_timestamp(column_field.type) and column_field.type.tz is None:
            column = rows.column(i)
            distinct = pc.unique(column)          # (a catalog row's times: one per statement)
            instants = pa.array([v and v.astimezone(dt.timezone.utc) for v in distinct.to_pylist()],
                                pa.timestamp("us", tz="UTC"))
            rows = rows.set_column(i, column_field.name, pc.take(instants, pc.index_in(column, value_set=distinct)))
    return rows


def _frame_of(spark, table, schema=None):
    """A DataFrame of an Arrow table's rows. Its chunks are combined first: pyspark 4.3's ``createDataFrame`` gives
    no row at all for a table whose first record batches are empty (as marks folded from an empty state are): a
    statement then joined no mark, and wrote every retransmitted id again."""
    return spark.createDataFrame(table.combine_chunks(), schema=schema)


def _to_arrow(frame):
    """A frame's rows as an Arrow table, as ``toArrow`` gives them. A Connect frame's ``toArrow`` first asks the
    server for the frame's schema (an analysis, a round trip of its own) to cast the rows to it; the schema the rows
    come with serves as well. (A client whose frames lack ``_to_table``, or a reply without a schema: ``toArrow``.)"""
    if not _remote(frame) or not hasattr(frame, "_to_table"):
        return frame.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    table, schema = frame._to_table()
    if schema is None:
        return frame.toArrow()
    return table.cast(to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC"))


def _optimized(frame):
    """A (classic) frame's optimized logical plan, in the JVM."""
    return frame._jdf.queryExecution().optimizedPlan()


def _estimated_bytes(plan) -> int:
    """The size of an optimized plan's rows as Spark's optimizer estimates it."""
    return int(str(plan.stats().sizeInBytes()))   # (a Scala BigInt)


#: A generator or table function in a plan's tree (Spark estimates none of their rows beyond their input's)
_GENERATOR = re.compile(r"^[\s:+|-]*(Generate|\w*UDTF)", re.MULTILINE)


def _schema_of(arrow_schema):
    """Spark's schema for an Arrow table's, as a classic ``createDataFrame`` of it infers (a timestamp without a
    time zone is a TIMESTAMP, not a TIMESTAMP_NTZ)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType, TimestampNTZType, TimestampType

    return StructType([StructField(f.name, TimestampType(), f.nullable) if isinstance(f.dataType, TimestampNTZType)
                       else f for f in from_arrow_schema(arrow_schema).fields])


class _Observed:
    """Aggregates of a frame observed on its way to a write: one job, no second read of the source. ``frame`` is
    the frame to write; ``values()`` gives the aggregates once it is written."""

    def __init__(self, frame, **metrics):
        if _remote(frame):
            from pyspark.sql.connect.observation import Observation
        else:
            from pyspark.sql import Observation

        self._columns = [column.alias(name) for name, column in metrics.items()]
        self._source = frame
        self._observation = Observation(f"__sd_observed_{uuid.uuid4().hex[:12]}")
        self.frame = frame.observe(self._observation, *self._columns)

    def values(self) -> dict:
        """Spark records no row when the write ran no task: a read of partitions or tables that hold no file
        (a compaction of commits without entries, a statement over an empty Parquet table), and pyspark's ``get``
        then fails an assertion. The aggregates of no rows are then computed over an empty relation (no scan).
        A Spark Connect client cannot tell that case from aggregates the server did not send (a plan it did not
        see whole): there they are computed over the frame itself, a second job, right in both cases."""
        held = getattr(self._observation, "_jo", None)
        if held is not None:
            if held.getRow().length() == 0:       # (waits for the write, as ``get`` does)
                return self._source.where("false").agg(*self._columns).first().asDict()
        elif not self._observation.get:           # Spark Connect: {} unless the server sent the aggregates
            return self._source.agg(*self._columns).first().asDict()
        return dict(self._observation.get)


@dataclass
class _OpenCommit:
    number: int
    published: set[int] | None      # the topic's published commits when it opened, once asked (one writer: they
                                    # stay so)
    directory: str | None = None    # where its topic rows were staged, once they were
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex)    # names its staging directory


@dataclass
class _Winners:
    """What one topic's published commits are known to be, where several drivers write (``visible_commits``)."""

    published: frozenset[int]       # as of this set of published commits
    described: dict[int, str]       # commit -> the attempt whose directory its partition names (no COMMITS row)


class SparkAdapter(EngineAdapter):
    DIALECT = SparkAnsi
    SUPPORTS_TRANSACTIONS = False
    STRING_TYPES = frozenset({"STRING"})
    INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
    ROW_NUMBER_NEEDS_ORDER = True
    PLAN = "window"          # one job per statement: the exceptions plan would take three or four
    KEY_HASH = "xxhash64"
    SEMI_JOIN_ABOVE = 20_000    # a relation made from Arrow is shipped whole to the executors with every job
    #: Above this many rows, a relation made from Arrow is written to a Parquet file and read from there, where the
    #: warehouse is on a local file system: a local relation lives whole in the driver's plan (a snapshot of a
    #: million producers' marks, made that way, exhausted a default 1 GB driver heap).
    FILE_ROWS = 100_000
    TRACKS_COMMITS = True    # a commit is published by registering its partition
    RAISE_ERROR = "raise_error"
    MARKS_AS_MAP = INLINE_ROWS
    ONE_TASK_BYTES = 4 << 20     # a shuffle's stage costs a small statement more than one task's work on 4 MB
    IN_PLAN_BYTES = 4 << 20      # a scratch table this small is kept in the plans as a local relation (_materialize)
    SETTINGS = SETTINGS
    READS_SPARK_FILE_SOURCES = True

    def __init__(self, spark=None, *, master: str = "local[2]", read_only: bool = False,
                 lock_timeout: float | None = 60.0):
        # PySpark logs a JSON error record for every AnalysisException, even a caught one.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        if spark is None or isinstance(spark, (str, Path)):
            spark = local_session(spark or DEFAULT_HOME, master, lock_timeout)
        _refuse_without_hive(spark)     # before anything is made in its catalog or its warehouse
        self.spark = spark
        #: a Spark Connect session: no JVM in this process (so no Py4J calls), and an Observation is filled only
        #: from the plan the client sent (a write through a temporary view reports nothing)
        self.remote = _remote(spark)
        self.F = _functions(spark)
        self.path = "spark"
        self.read_only = read_only
        self.DEFAULT_NAMESPACE = spark.catalog.currentDatabase()
        self._open: dict[str, _OpenCommit] = {}     # topic key -> its commit in progress
        # table -> its directory, shared with the other sessions of this process on the same warehouse and default
        # namespace (where the catalog tables' names resolve): one that moves a table (``delete_rows``) makes them
        # all read it again, where each kept its own before and appended into the directory the move had removed
        # (the writer lock orders the sessions' writes)
        self._locations: dict[str, str] = _LOCATIONS.setdefault((self.identity, self.DEFAULT_NAMESPACE), {})
        self._storage: dict[str, object] = {}       # table -> its storage format in the JVM (``_add_partition``)
        self._analyzed: tuple | None = None         # (SQL, its frame): the query ``query_columns`` read last
        self._table_columns: dict[str, list[tuple[str, str]]] = {}   # topic key -> its table's columns
        self._scratch: dict[str, str] = {}          # temporary table -> the directory that holds its rows
        self._winners: dict[str, _Winners] = {}     # topic key -> its commits' winners (several drivers)
        # (thread, topic key) -> [its partitions, or None until listed], inside listed_once
        self._listings: dict[tuple[int, str], list] = {}
        self._directories: dict[str, dict[str, str | None]] = {}   # table -> partition -> directory (Spark Connect)
        self._scripts = True                        # the server runs SQL scripts (``_refresh_in_one``)
        if not self.exclusive:      # see create_catalog_table
            spark.conf.set("spark.sql.hive.convertInsertingUnpartitionedTable", "false")
        self.register_functions()

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Spark's errors, from Python or from a failed Java job (a Py4JJavaError), as EngineErrors; every Spark
        call of the adapter runs inside, with the SETTINGS it needs."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        try:
            with _settings(self.spark):
                yield
        except (PySparkException, Py4JJavaError) as error:
            raise _engine_error(error) from error

    def _check_writable(self, statement: exp.Expression | str, what: str | None = None) -> None:
        """Spark has no read-only mode: a read-only session refuses every write itself, before Spark starts it."""
        if self.read_only and (what or _writes(statement)):
            if what is None:
                what = statement.split(None, 1)[0].upper() if isinstance(statement, str) else statement.key.upper()
            raise EngineError(f"this seqdedup session on Spark is read-only (connected with read_only=True), so "
                              f"nothing can be written ({what} refused before it ran); connect without "
                              "read_only=True to write")

    def _sql(self, statement: exp.Expression | str):
        text = statement if isinstance(statement, str) else self.sql(statement)
        with self._errors():
            args = self.bound(text, ":")
            return self.spark.sql(text, args=args) if args else self.spark.sql(text)

    def _query(self, query: exp.Expression | str):
        """A frame of a query whose rows or columns are read at once (``fetchall``, ``fetch_arrow``,
        ``tables_columns``). On Spark Connect, ``spark.sql`` is a round trip of its own, where the server analyses
        the statement before the frame's action sends it again: a query seqdedup built (a SELECT) is sent once,
        with the action, and its errors come with it. Anything else, or a client whose plan classes differ, goes
        through ``spark.sql``."""
        if not (self.remote and isinstance(query, exp.Query)):
            return self._sql(query)
        try:
            from pyspark.sql.connect.dataframe import DataFrame
            from pyspark.sql.connect.plan import SQL
        except ImportError:
            return self._sql(query)
        text = self.sql(query)
        args = {name: self.F.lit(value) for name, value in (self.bound(text, ":") or {}).items()}
        return DataFrame(SQL(text, [], args, []), self.spark)

    def _database(self, table: exp.Table) -> str | None:
        """The database ``table`` is in: the one named, else the catalog's for seqdedup's own tables (``_generate``);
        None for another name without one."""
        return table.db or (self.DEFAULT_NAMESPACE if table.meta.get(IN_CATALOG) else None)

    def execute(self, statement: exp.Expression | str) -> None:
        self._check_writable(statement)
        self._sql(statement)

    def fetchall(self, query: exp.Expression | str, *, committed: bool = False) -> list[tuple]:
        with self._errors():
            return [tuple(row) for row in self._query(query).collect()]

    def fetch_arrow(self, query: exp.Expression | str, *, committed: bool = False):
        with self._errors():
            return _to_arrow(self._query(query))

    def relation(self, name: str, table, *, committed: bool = False) -> exp.Table:
        """A few rows (a statement's handful of producers) go into the query as an inline table: a relation made
        from Arrow is a distributed one, and a join with it costs a job to broadcast it."""
        with self._errors():
            if table.num_rows > self.FILE_ROWS and _local(self._warehouse()):
                self._file_relation(name, table).createOrReplaceTempView(name)
            elif 0 < table.num_rows <= INLINE_ROWS:
                rows = [tuple(literal(v) for v in row.values()) for row in table.to_pylist()]
                inline = exp.select("*").from_(exp.values(rows, alias="t", columns=table.column_names))
                self._sql(inline).createOrReplaceTempView(name)
            else:       # (a Connect client infers no schema from no rows: it is given)
                schema = _schema_of(table.schema) if self.remote and not table.num_rows else None
                _frame_of(self.spark, table, schema).createOrReplaceTempView(name)
        return self.temp_table(name)

    def _file_relation(self, name: str, table):
        """An Arrow table as a frame read from a Parquet file in the scratch folder (dropped with the name). Its
        naive timestamps read back as TIMESTAMP_NTZ: cast to TIMESTAMP, the type ``createDataFrame`` gives them
        (both read the wall-clock time in the session's time zone)."""
        import pyarrow.parquet as pq
        F = self.F
        from pyspark.sql.types import TimestampNTZType

        directory = f"{self._warehouse()}/{SCRATCH}/{name}-{uuid.uuid4().hex[:8]}"
        os.makedirs(_local(directory))
        pq.write_table(table, f"{_local(directory)}/part-0.parquet")
        self._scratch[name] = directory
        frame = self.spark.read.parquet(directory)
        return frame.select(*[F.col(f.name).cast("timestamp") if isinstance(f.dataType, TimestampNTZType)
                              else F.col(f.name) for f in frame.schema.fields])

    def marks_map(self, table):
        # (a map parameter must be a map() of literals of one type, or Spark refuses it: INVALID_SQL_ARG)
        F = self.F
        marks = table.column("sequence_id").fill_null(-1).cast(pa.string()).to_pylist()
        return F.create_map(*[F.lit(value) for pair in zip(table.column("producer").to_pylist(), marks)
                              for value in pair])

    def constant(self, value: exp.Expression) -> exp.Expression:
        """A DECIMAL: Spark compiles the code of a query with its BIGINT constants written into it, so a new value
        costs a new compilation (some 15 to 40 ms a class), where a DECIMAL constant is referenced from the code.
        (Arithmetic on a DECIMAL this wide is slower per row: for small statements only.)"""
        return exp.cast(value, exp.DataType.build("DECIMAL(20, 0)"))

    def fits_one_task(self, query: exp.Expression) -> bool:
        """From the size Spark's optimizer estimates for the rows (a classic session's; a Connect client cannot
        ask, and distributes them)."""
        if self.remote or self.ONE_TASK_BYTES is None:
            return False
        text, analyzed = self._analyzed or (None, None)
        try:
            with self._errors():
                frame = analyzed if text == self.sql(query) else self._sql(query)
                return _estimated_bytes(_optimized(frame)) <= self.ONE_TASK_BYTES
        except EngineError:     # (an expression that fails when folded, 2^63 - 1 + 1: the statement reports it)
            return False

    def append_rows(self, table: exp.Table, rows) -> None:
        """Where the warehouse is on the local disk, the rows become one Parquet file in the table's directory,
        written from here: a Spark job would cost a small statement a fifth of its time. The file is written under
        a hidden name (Spark lists no file whose name starts with a dot) and renamed into place, so a read sees all
        of it or none of it; then Spark's listing of the table is refreshed. Elsewhere (HDFS, an object store), an
        INSERT."""
        directory = _local(self._directory(table))
        if directory is None or not rows.num_rows:
            return super().append_rows(table, rows)
        import pyarrow.parquet as pq

        self._check_writable(None, f"an append to {table.name}")
        name = f"part-{uuid.uuid4().hex}-seqdedup.parquet"
        try:
            # (INT96 timestamps, as Spark's own Parquet writer stores them by default)
            pq.write_table(_as_spark_binds(rows), f"{directory}/.{name}", use_deprecated_int96_timestamps=True)
            os.rename(f"{directory}/.{name}", f"{directory}/{name}")
        except OSError as error:
            with contextlib.suppress(OSError):
                os.remove(f"{directory}/.{name}")
            raise _engine_error(error) from error
        self._forget_files(table)

    def _forget_files(self, table: exp.Table) -> None:
        """Spark keeps a table's file listing once read: files added other than by Spark stay unseen until the
        listing is dropped. In reach of the JVM, the table's entry and the listings are dropped (the next read lists
        again); else ``REFRESH TABLE``, which also resolves the table again (some 30 ms)."""
        found = self._jvm_catalog(table)
        with self._errors():
            if found is None:
                return self.spark.catalog.refreshTable(self.sql(table))
            catalog, name = found
            catalog.invalidateCachedTable(name)
            _java(self.spark, "org.apache.spark.sql.execution.datasources.FileStatusCache").getOrCreate(
                self.spark._jsparkSession).invalidateAll()

    def binary(self, text: exp.Expression) -> exp.Expression:
        return exp.Collate(this=exp.cast(text, "string"), expression=exp.Var(this="UTF8_BINARY"))

    @property
    def PARTITIONS(self) -> int:
        return int(self.spark.conf.get("spark.sql.shuffle.partitions"))

    @property
    def READS_ALONGSIDE(self) -> bool:
        """On Spark Connect: the server runs a client's queries at once (a classic session's small jobs would share
        the driver's cores)."""
        return self.remote

    def row_number(self) -> exp.Expression:
        """Row r of partition i of n gets ``r * n + i + 1``: unique with no global sort (the window plan fixes n
        with a REPARTITION hint, which adaptive execution leaves as it is)."""
        partition = exp.cast(exp.func("spark_partition_id"), "bigint")
        row = exp.Sub(this=exp.func("monotonically_increasing_id"),
                      expression=exp.BitwiseLeftShift(this=partition.copy(), expression=exp.convert(33)))
        return exp.Add(this=exp.Add(this=exp.Mul(this=exp.Paren(this=row), expression=exp.convert(self.PARTITIONS)),
                                    expression=partition), expression=exp.convert(1))

    @functools.cached_property
    def exclusive(self) -> bool:
        """A session ``local_session`` made holds its home's lock: nobody else publishes. A user's session may
        share its metastore with other drivers, and a Spark Connect session always may (the server serves other
        clients), even where this process started the server and so holds its home's lock (``start_local_server``)."""
        if self.remote:
            return False
        warehouse = self.spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
        return any(str(home / "warehouse") == warehouse.rstrip("/") for home in _homes)

    @functools.cached_property
    def lease_store(self):
        """The metastore, where other drivers may write (a shared metastore, Spark Connect): extensions/hive_leases.py.
        A read-only session's producers cannot send, and hold no name."""
        if self.exclusive or self.read_only:
            return None
        from .hive_leases import HiveLeases

        return HiveLeases(self)

    def fetch_with_columns(self, statement: exp.Expression | str) -> tuple[list[str], list[tuple]]:
        self._check_writable(statement)
        with self._errors():
            frame = self._sql(statement)
            return list(frame.columns), [tuple(row) for row in frame.collect()]

    def query_columns(self, query: exp.Expression) -> list[tuple[str, str]]:
        self._analyzed = None
        frame = self._sql(query)
        self._analyzed = (self.sql(query), frame)      # analyzed once: ``fits_one_task`` may ask of it next
        return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]

    def columns(self, table: exp.Table, *, committed: bool = False) -> list[tuple[str, str]]:
        # (the schema asked for at once, a missing table's error caught: on Spark Connect each catalog call is a
        # round trip, and tableExists first made it two)
        from pyspark.errors import AnalysisException

        name = self.sql(table)
        try:
            with self._errors():
                return [(f.name, f.dataType.simpleString()) for f in self.spark.table(name).schema.fields]
        except EngineError as error:
            if isinstance(error.__cause__, AnalysisException) and _not_found(error.__cause__, table):
                return []
            raise

    def tables_columns(self, tables: list[exp.Table]) -> list[list[tuple[str, str]]]:
        """One query names every table, each one's columns as a struct: analysed, never run (a third of the time
        of a lookup per table, which ``connect`` made for each catalog table). A table missing fails it: then each
        table is looked up alone."""
        alias = [f"t{i}" for i in range(len(tables))]
        select = exp.select(*[exp.alias_(exp.func("struct", exp.Column(this=exp.Star(), table=exp.to_identifier(a))),
                                         a) for a in alias]).from_(tables[0].copy().as_(alias[0]))
        for table, name in zip(tables[1:], alias[1:]):
            select = select.join(table.copy().as_(name), join_type="cross")
        try:
            with self._errors():
                fields = self._query(select.limit(0)).schema.fields
        except EngineError:
            return super().tables_columns(tables)
        return [[(f.name, f.dataType.simpleString()) for f in field.dataType.fields] for field in fields]

    def check_name(self, part: str) -> None:
        """The Hive catalog takes only letters, digits and _ in table and database names."""
        if not part.replace("_", "").isascii() or not part.replace("_", "").isalnum():
            raise TopicError(f"{part!r} cannot name a table in Spark's Hive catalog, which allows only letters, "
                             "digits and _; pick another name (DuckDB topics may use any name)")
        if len(part) > 128:     # the metastore's limit for database names; longer names fail deep in Hive
            raise TopicError(f"{part[:20]!r}... ({len(part)} characters) is too long for Spark's Hive catalog, which "
                             "takes names of up to 128 characters; pick a shorter name")

    def create_temp_table(self, name: str, query: exp.Expression) -> exp.Table:
        return self._materialize(name, self._sql(query))

    def temp_table_rows(self, table: exp.Table) -> int:
        """Of one written to the scratch folder on the local disk: from its Parquet files' footers, with no job."""
        directory = _local(self._scratch.get(table.name, ""))
        if not directory:
            return super().temp_table_rows(table)
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(f"{directory}/{name}").metadata.num_rows for name in os.listdir(directory)
                   if name.endswith(".parquet") and not name.startswith((".", "_")))

    def drop_temp_table(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)
        directory = self._scratch.pop(name, None)
        if directory is not None:
            _remove(directory)

    def has_temp_table(self, name: str) -> bool:
        from pyspark.errors import AnalysisException

        try:        # (a temporary view is found before a table of the same name)
            return bool(self.spark.catalog.getTable(name).isTemporary)
        except AnalysisException:
            return False

    def load_arrow(self, name: str, table) -> exp.Table:
        # the rows travel inside the plan (a local relation): every read sees the same ones, with no job
        with self._errors():
            _frame_of(self.spark, table).createOrReplaceTempView(name)
        return self.temp_table(name)

    def load_dataframe(self, name: str, frame, *, numbered: bool = True) -> exp.Table:
        # By name, its temporary view would be registered in its own session, where seqdedup's statements never
        # look; numbered, it is written to the warehouse, which any session of the same JVM can do (a foreachBatch
        # frame's session is a clone), but not one of the other kind.
        if not _same_session(frame.sparkSession, self.spark) and (not numbered or _remote(frame) != self.remote):
            kind = "a Spark Connect" if _remote(frame) else "a classic"
            given = "" if numbered else f" as {name!r}"
            raise TopicError(f"the DataFrame given{given} belongs to another SparkSession ({kind} one); create it "
                             "with the session seqdedup.connect was given")
        if not numbered:      # a frame used by name: a view of it, read as the user's own query would read it
            with self._errors():
                frame.createOrReplaceTempView(name)
            return self.temp_table(name)
        # Numbered in the frame's order (monotonically_increasing_id follows partitions, then rows), once.
        number = self.F.expr("row_number() OVER (ORDER BY monotonically_increasing_id()) - 1")
        return self._materialize(name, frame.withColumn(ARRIVAL, number))

    def _materialize(self, name: str, frame) -> exp.Table:
        """Compute a frame once, so that the steps that read it see the same rows (a view would be recomputed).

        A few rows (``IN_PLAN_BYTES`` as Spark estimates them) are collected and kept in the plans that read them,
        as a local relation: one job, and no file to list or scan when read. (A straddling batch entry makes a
        small statement materialize a dozen steps; each cost it about 0.4 s as files, about 0.15 s this way.)
        Other rows are written as Parquet to a scratch directory and read back, with the frame's schema: Spark then
        reads no file's footer to learn it (a third of the read). (Not ``localCheckpoint``: a query over two
        checkpoints of one lineage fails in Spark 4 with "key not found", and Spark Connect has no checkpoints.)"""
        with self._errors():
            if self._fits_in_plan(frame):
                _frame_of(self.spark, frame.toArrow(), frame.schema).createOrReplaceTempView(name)
                return self.temp_table(name)
            directory = f"{self._warehouse()}/{SCRATCH}/{name}-{uuid.uuid4().hex[:8]}"
            frame.write.mode("error").parquet(directory)
            self._scratch[name] = directory
            self.spark.read.schema(frame.schema).parquet(directory).createOrReplaceTempView(name)
        return self.temp_table(name)

    def _fits_in_plan(self, frame) -> bool:
        """Whether a frame's rows are few enough to collect, by Spark's estimate, and Arrow can carry their types.
        Not where a generator makes them (``explode``, a table function): Spark estimates its rows as its input's,
        one row for ``explode(sequence(1, 10000000))``, and they would all come into the driver."""
        from pyspark.errors import PySparkException
        from pyspark.sql.pandas.types import to_arrow_schema

        if self.remote:
            return False
        plan = _optimized(frame)
        if _GENERATOR.search(plan.treeString()):
            return False
        try:
            to_arrow_schema(frame.schema, timezone="UTC")
        except PySparkException:      # (a year-month or calendar interval)
            return False
        return _estimated_bytes(plan) <= self.IN_PLAN_BYTES

    @functools.cached_property
    def _warehouse_setting(self) -> str:
        """``spark.sql.warehouse.dir``, a static setting: read once (on Spark Connect each read is a round trip)."""
        return self.spark.conf.get("spark.sql.warehouse.dir")

    def _warehouse(self) -> str:
        return self._warehouse_setting.rstrip("/")

    @property
    def identity(self) -> str:
        return f"spark:{self._warehouse_setting}"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield    # no transactions: a topic commit is published by registering its partition

    # --- commits -----------------------------------------------------------------------------------------------

    def create_topic_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> None:
        # what this process kept of a table of that name (dropped outside seqdedup) is forgotten, and nothing else:
        # the catalog tables' directories stay known (forgetting them all made the next statement read them again)
        name = self.sql(table)
        self._table_columns.pop(f"{table.db}.{table.name}", None)
        self._locations.pop(name, None)
        self._storage.pop(name, None)
        create = create_table(table, columns, exists=False)
        create.set("properties", exp.Properties(expressions=[
            exp.FileFormatProperty(this=exp.Var(this="PARQUET")),
            exp.PartitionedByProperty(this=exp.Schema(expressions=[exp.to_identifier("_commit")]))]))
        self._precreate(table)
        self.execute(create)

    def _precreate(self, table: exp.Table) -> None:
        """Where several drivers may create the same table at once, make its folder first. The metastore of a
        driver that loses the race deletes the folder it made for the table, even when the winner uses it: made
        beforehand, nobody made it, and nobody deletes it. (A local warehouse only; elsewhere, create the catalog
        and the topics from one driver before several write.)"""
        if self.exclusive:
            return
        database = self._database(table) or self.DEFAULT_NAMESPACE
        with self._errors():
            root = _local(self.spark.catalog.getDatabase(database).locationUri)
        if root is not None:
            os.makedirs(f"{root.rstrip('/')}/{table.name.lower()}", exist_ok=True)

    def create_catalog_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> bool:
        """Where several drivers append to the catalog tables, they are Hive tables (``STORED AS PARQUET``): Spark
        writes a Hive table's rows through a staging folder of each write's own (``__init__`` keeps it from using
        its file source writer), where a data source table's writes share ``<table>/_temporary``, which the first
        write to finish deletes under the others. Without IF NOT EXISTS: the metastore's answer says whether the
        table was there (an EngineError that ``already_exists`` recognizes), with no round trip to ask first."""
        create = create_table(table, columns, exists=False)
        if not self.exclusive:
            create.set("properties", exp.Properties(expressions=[
                exp.FileFormatProperty(this=exp.Var(this="PARQUET"), hive_format=True)]))
        self._precreate(table)
        try:
            self.execute(create)
        except EngineError as error:
            if "LOCATION_ALREADY_EXISTS" in str(error):
                raise _unregistered_catalog(table, error) from error
            raise
        return True

    def published_commits(self, topic) -> set[int]:
        """The commits seqdedup published: the partitions of the topic whose directory it staged (``_staged``), and
        the commits a compacted one holds; any other partition is foreign (``foreign_partitions``), whatever its
        number."""
        return self._layout(topic).published

    def foreign_partitions(self, topic) -> list[str]:
        return self._layout(topic).foreign

    def own_rows(self, topic) -> exp.Expression:
        """Also leaves out the partitions a compaction merged into another and did not drop yet (``_Layout``)."""
        layout = self._layout(topic)
        return written_by_seqdedup(foreign_commits(layout.foreign) | {unit.last for unit in layout.covered})

    @contextlib.contextmanager
    def listed_once(self, topic) -> Iterator[None]:
        """Nested in another for the same topic (a recovery inside ``Session.stats``), it keeps that one's listing:
        the outermost forgets it. Each thread lists for itself: another thread's listing may be older than a commit
        this one waited for."""
        key = (threading.get_ident(), topic.key)
        if key in self._listings:
            yield
            return
        self._listings[key] = [None]
        try:
            yield
        finally:
            del self._listings[key]

    def _layout(self, topic) -> _Layout:
        """The topic's partitions: listed (a call to the metastore, which grows with them), or as listed already
        inside ``listed_once``."""
        held = self._listings.get((threading.get_ident(), topic.key))
        layout = held[0] if held else None
        if layout is None:
            layout = _Layout.of(self._partitions(topic.table))
            if held is not None:
                held[0] = layout
        return layout

    def _listing_changed(self, topic) -> None:
        for (_, key), held in list(self._listings.items()):     # every thread's: the partitions changed under all
            if key == topic.key:
                held[0] = None

    def _partitions(self, table: exp.Table) -> list[tuple[str, str | None]]:
        """(value, directory) of each partition of a table partitioned by one column, from the session's catalog in
        one call (SHOW PARTITIONS gives no directories). Where the JVM is out of reach (Spark Connect),
        ``_described_partitions``. A listing that another driver's compaction changed under it (MOVED_UNDER) is
        listed again, a few times after a short random wait; then an EngineError that says a retry is safe."""
        for tries in range(1, MOVED_TRIES + 1):
            try:
                return self._list_partitions(table)
            except EngineError as error:
                if not _moved_under(error):
                    raise
                if tries == MOVED_TRIES:
                    raise EngineError(f"another driver changed the partitions of {table.name} (a compaction) while "
                                      f"this one listed them, {tries} times in a row ({error}); nothing was written, "
                                      "and it is safe to run it again") from error
                time.sleep(random.uniform(0, MOVED_WAIT * tries / MOVED_TRIES))

    def _list_partitions(self, table: exp.Table) -> list[tuple[str, str | None]]:
        with self._errors():
            found = self._jvm_catalog(table)
            if found is None:
                return self._described_partitions(table)
            catalog, name = found
            listed = catalog.listPartitions(name, _java(self.spark, "scala.Option").empty())
            return _listed_partitions(listed.mkString("\n"), listed.size())

    def _described_partitions(self, table: exp.Table) -> list[tuple[str, str | None]]:
        """Spark Connect: the values SHOW PARTITIONS lists, each with the directory a DESCRIBE of it gives, a round
        trip each, so kept: a directory changes only when a compaction merges partitions, which then drops some.
        When a partition this session knew is gone, every directory is described again (another driver's
        compaction; until its drop, this session may take its merged partition for one commit, and read the
        entries of the commits merged into it twice, as any plain read does then)."""
        values = [row[0].split("=", 1)[1] for row in self.fetchall(f"SHOW PARTITIONS {self.sql(table)}")]
        known = self._directories.setdefault(self.sql(table), {})
        if not known.keys() <= set(values):
            known.clear()
        # (the DESCRIBEs alongside each other: a new process describes every partition once)
        described = {value: self.alongside(lambda number=int(value): self._directory_of(table, number))
                     for value in values if value not in known and value.isdigit()}
        for value in values:
            if value not in known:      # (a partition another tool made with no number has no spec to describe)
                known[value] = described[value].result() if value in described else None
        return [(value, known[value]) for value in values]

    def _directory_of(self, table: exp.Table, number: int) -> str:
        describe = exp.Describe(this=table.copy(), style="EXTENDED", kind="TABLE",
                                partition=self._partition_spec(number))
        return next(row[1] for row in self.fetchall(describe) if row[0] == "Location")

    def _jvm_catalog(self, table: exp.Table) -> tuple | None:
        """(the session's catalog in the JVM, ``table``'s identifier there); None where the JVM is out of reach
        (Spark Connect)."""
        if getattr(self.spark, "_jvm", None) is None:
            return None
        name = _java(self.spark, "org.apache.spark.sql.catalyst.TableIdentifier")(
            table.name, _java(self.spark, "scala.Option").apply(self._database(table)))
        return self.spark._jsparkSession.sessionState().catalog(), name

    def last_published_commit(self, topic) -> int:
        return max(self.published_commits(topic), default=0)

    def visible_commits(self, topic, *, include_open: bool = True) -> exp.Expression:
        """Rows without an attempt count once their commit is published and below every failed one. Where several
        drivers write, a row's attempt must be its commit's winner: the COMMITS row the winner adds after its
        partition is registered, or, if it has not (yet), the attempt its partition's directory names."""
        current = self._open.get(topic.key) if include_open else None
        if current is not None and current.published is None:
            current.published = self.published_commits(topic)
        published = current.published if current else self.published_commits(topic)
        top = max(published, default=0)
        column, attempt = exp.column("commit_id"), exp.column("attempt")
        visible = column.copy() <= exp.convert(top)
        failed = sorted(set(range(1, top + 1)) - published)    # commits that wrote rows but were never published
        if failed:
            visible = exp.and_(visible, exp.not_(column.copy().isin(*failed)))
        mine = column.eq(current.number) if current else None
        if self.exclusive:
            return exp.or_(visible, mine) if current else visible
        pair = exp.Tuple(expressions=[column.copy(), attempt.copy()])
        logged = exp.select("commit_id", "attempt").from_(catalog_table("seqdedup_commits")).where(
            exp.column("topic").eq(exp.Literal.string(topic.key)))
        visible = exp.or_(exp.and_(attempt.is_(exp.null()), visible), exp.In(this=pair, query=logged.subquery()))
        described = self._described(topic, frozenset(published))
        for number, winner in sorted(described.items()):
            visible = exp.or_(visible, exp.and_(column.eq(exp.convert(number)), attempt.eq(exp.convert(winner))))
        if current:
            visible = exp.or_(visible, exp.and_(mine, attempt.eq(exp.convert(current.attempt))))
        return visible

    def _described(self, topic, published: frozenset[int]) -> dict[int, str]:
        """The winners of published commits whose attempt wrote catalog rows but no COMMITS row (it died between
        registering its partition and adding the row, or is in between now): read from their partitions."""
        known = self._winners.get(topic.key)
        if known is not None and known.published == published:
            return known.described
        described = dict(known.described) if known else {}
        key = exp.column("topic").eq(exp.Literal.string(topic.key))
        logged = exp.select("commit_id").from_(catalog_table("seqdedup_commits")).where(key.copy())
        tagged = exp.union(*[exp.select("commit_id").from_(catalog_table(name)).where(
            exp.and_(key.copy(), exp.column("attempt").is_(exp.not_(exp.null())),
                     exp.not_(exp.In(this=exp.column("commit_id"), query=logged.subquery()))))
            for name in ("producer_sequences", "seqdedup_statements", "seqdedup_consumers")], distinct=True)
        wanted = {number for (number,) in self.fetchall(tagged) if number in published and number not in described}
        if wanted:
            locations = {int(value): location for value, location in self._partitions(topic.table)
                         if value.isdigit() and int(value) in wanted}
            for number in wanted & set(locations):   # (a compaction logs its commits' winners before it merges)
                described[number] = self._partition_attempt(topic, number, locations.get(number))
        self._winners[topic.key] = _Winners(published, described)
        return described

    def _partition_attempt(self, topic, number: int, location: str | None) -> str:
        """The attempt whose staging directory (``<commit>-<attempt>-<n>``) the partition of commit ``number`` is;
        its location read from the metastore if not given."""
        return _staging_name(location or self._directory_of(topic.table, number))[1]

    @property
    def contended(self) -> bool:
        return not self.exclusive

    def refresh(self, *tables: exp.Table) -> None:
        """Spark keeps a table's file listing once read: rows another driver appended since stay unseen until then."""
        if self.exclusive:
            return
        from pyspark.errors import AnalysisException

        with self._errors():
            if self.remote and len(tables) > 1 and self._refresh_in_one(tables):
                return
            for table in tables:
                try:        # (one call each: a missing table's error caught, rather than a tableExists first)
                    self.spark.catalog.refreshTable(self.sql(table))
                except AnalysisException as error:
                    if not _not_found(error, table):
                        raise

    def _refresh_in_one(self, tables: tuple[exp.Table, ...]) -> bool:
        """Spark Connect: refresh ``tables`` in one request, a SQL script (Spark 4) of a REFRESH TABLE each: a
        request costs a Connect server some 50 ms, a refresh of a small table less. False where the script fails
        (a table missing: the caller refreshes them one by one; a server without SQL scripting: from now on too)."""
        from pyspark.errors import PySparkException

        if not self._scripts:
            return False
        refreshes = " ".join(f"{self.sql(exp.Refresh(this=table.copy(), kind='TABLE'))};" for table in tables)
        try:
            self.spark.sql(f"BEGIN {refreshes} END")
        except PySparkException as error:
            self._scripts = error.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
            return False
        return True

    def attempt(self, topic) -> str | None:
        return None if self.exclusive else self._open[topic.key].attempt

    def open_commit(self, topic, commit: int) -> None:
        self._check_writable(None, f"a commit of {topic.key}")     # refused before the statement does any work
        self._open[topic.key] = _OpenCommit(commit, None)

    def write_topic(self, topic, insert: exp.Insert, *, counted: bool = True) -> int | None:
        """Stage the rows ``insert`` writes as the open commit's; their count when ``counted`` (else None)."""
        current = self._open[topic.key]
        names = [column.name for column in insert.this.expressions]
        current.directory, written = self._stage(topic, insert.expression, names, current.number, counted=counted)
        return written

    def write_decided(self, topic, decided, keep, insert_for, metrics, outcome, last, proceed, name):
        """One job: the decided rows are observed (the metrics, and the outcome of each producer's last row, as a
        list) on their way to the commit's directory, whatever the metrics say (the caller discards them)."""
        F = self.F

        named = exp.func("named_struct", *[part for e in outcome
                                            for part in (exp.Literal.string(e.alias_or_name), e.unalias())])
        rows = exp.func("collect_list", exp.Case(ifs=[exp.If(this=exp.column(last), true=named)]))
        with self._errors():
            observed = _Observed(self._sql(decided), **{k: F.expr(self.sql(e)) for k, e in metrics.items()},
                                 __sd_outcome=F.expr(self.sql(rows)))
            kept = observed.frame.where(F.col(keep))
            if self.remote:     # a Connect client reads an observation only from the very plan it sent
                insert = insert_for(exp.table_(name))
                current = self._open[topic.key]
                current.directory = self._stage(topic, insert.expression, [c.name for c in insert.this.expressions],
                                                current.number, counted=False, frame=kept)[0]
                got = observed.values()
            else:
                kept.createOrReplaceTempView(name)     # (a view and SQL over it: cheaper than two selectExpr)
                try:
                    self.write_topic(topic, insert_for(exp.table_(name)), counted=False)    # counted above
                    got = observed.values()
                finally:
                    self.spark.catalog.dropTempView(name)
        outcome_rows = [row.asDict() for row in got.pop("__sd_outcome")]
        return Decided(got, outcome_rows)

    def discard_commit_rows(self, topic) -> None:
        current = self._open[topic.key]
        if current.directory:
            _remove(current.directory)
        current.directory = None

    def publish(self, topic) -> None:
        current = self._open[topic.key]
        if current.directory is None:    # nothing staged (a snapshot, a policy change): an empty directory
            current.directory = self._empty_directory(topic, current.number)
        try:
            self._add_partition(topic.table, current.number, current.directory)
        except EngineError as error:
            if already_exists(" / ".join(_causes(error.__cause__ or error))):
                raise CommitConflict(f"another writer published commit {current.number} of {topic.key} first; "
                                     "this attempt is not published (decide again on the new state)") from error
            raise
        if self.remote:
            self._directories.setdefault(self.sql(topic.table), {})[str(current.number)] = current.directory
        if not self.exclusive:       # the winner says so (visible_commits reads the partition if it never does)
            known = self._winners.get(topic.key)
            if known is not None and current.published is not None and known.published == current.published:
                known.published = known.published | {current.number}
            self.append_rows(catalog_table("seqdedup_commits"), pa.Table.from_pylist(
                [{"topic": topic.key, "commit_id": current.number, "attempt": current.attempt,
                  "published_at": dt.datetime.now()}], schema=arrow_schema(COMMITS)))

    def _add_partition(self, table: exp.Table, number: int, directory: str) -> None:
        """Register ``directory`` as the partition ``_commit = number``: the metastore registers one partition per
        number, a compare-and-set. Through the session's catalog in the JVM where it is in reach (about a third of
        an ``ALTER TABLE ... ADD PARTITION``, which also parses, resolves and refreshes the table; a topic's
        partitions are listed from the metastore by every read, so no refresh is needed), else that statement."""
        self._check_writable(None, f"a commit of {table.name}")
        found = self._jvm_catalog(table)
        if found is None:
            alter = sqlglot.parse_one("ALTER TABLE t ADD PARTITION (_commit = 0) LOCATION ''", read="spark")
            alter.set("this", table.copy())
            alter.find(exp.EQ).set("expression", exp.convert(number))
            alter.find(exp.LocationProperty).set("this", exp.Literal.string(directory))
            return self.execute(alter)
        catalog, name = found
        convert = _java(self.spark, "org.apache.spark.api.python.PythonUtils")
        with self._errors():
            key = self.sql(table)
            if key not in self._storage:        # the table's storage format, which a new partition's copies
                self._storage[key] = catalog.getTableMetadata(name).storage()
            partition = _java(self.spark, "org.apache.spark.sql.catalyst.catalog.CatalogTablePartition")(
                convert.toScalaMap({"_commit": str(number)}), _storage_at(self.spark, self._storage[key], directory),
                convert.toScalaMap({}), int(time.time() * 1000), -1, _java(self.spark, "scala.Option").empty())
            catalog.createPartitions(name, convert.toSeq([partition]), False)

    def close_commit(self, topic) -> None:
        self._open.pop(topic.key, None)

    def _stage(self, topic, rows: exp.Select, names: list[str], commit: int, *, counted: bool = True,
               frame=None) -> tuple[str, int | None]:
        """Write ``rows``, whose columns are ``names``, to a new directory as the topic's Parquet files, every
        column cast to the table's type (``_commit`` left out: it is the partition's value); returns the path and,
        when ``counted``, the number of rows written (observed on the way: no second job; an observation costs
        some 40 ms, paid only where the count is used). With a ``frame``, ``rows`` are its projections (their FROM
        is not read): the write stays one plan with the frame's."""
        F = self.F

        inner = rows.copy()
        inner.set("expressions", [exp.alias_(e.unalias(), f"_c{i}") for i, e in enumerate(inner.expressions)])
        where = {name.lower(): i for i, name in enumerate(names)}
        typed = exp.select(*[
            exp.alias_(exp.cast(exp.column(f"_c{where[name.lower()]}") if name.lower() in where else exp.null(),
                                exp.DataType.build(kind, dialect=self.DIALECT)), name)
            for name, kind in self._columns_of(topic) if name != "_commit"
        ]).from_(inner.subquery("r"))
        directory = self._staging_directory(topic, commit)
        self._check_writable(exp.insert(typed, topic.table.copy()))     # the topic rows, written below
        with self._errors():
            if frame is None:
                frame = self._sql(typed)
            else:
                frame = self._projected(self._projected(frame, inner.expressions), typed.expressions)
            if not counted:
                frame.write.mode("error").parquet(directory)
                return directory, None
            observed = _Observed(frame, rows=F.count(F.lit(1)))
            observed.frame.write.mode("error").parquet(directory)
            return directory, observed.values()["rows"]

    def _projected(self, frame, expressions: list[exp.Expression]):
        """``SELECT expressions FROM frame`` as DataFrame operations, the parameters bound now given as columns of
        literals (as ``spark.sql`` binds them)."""
        bound = self.bound(" ".join(self.sql(e) for e in expressions), ":") or {}
        inlined = [e.transform(lambda node: exp.column(f"__sd_parameter_{node.name}")
                               if isinstance(node, exp.Placeholder) and node.name in bound else node)
                   for e in expressions]
        if bound:
            frame = frame.withColumns({f"__sd_parameter_{k}": self.F.lit(v) for k, v in bound.items()})
        return frame.selectExpr(*[self.sql(e) for e in inlined])

    def _staging_directory(self, topic, commit: int) -> str:
        """A new directory for the rows of ``commit`` (this attempt's), named as ``_staging_name`` reads it."""
        return f"{self._location(topic)}/{STAGING}/{commit}-{self._open[topic.key].attempt}-{uuid.uuid4().hex[:8]}"

    def _empty_directory(self, topic, commit: int) -> str:
        """A new directory with no file, for a commit that wrote no entry: made directly on a local disk (a Spark
        job writing no row costs about 0.4 s, as much as the rest of a snapshot's commit), elsewhere by that job."""
        directory = self._staging_directory(topic, commit)
        if _local(directory):
            os.makedirs(_local(directory))
            return directory
        return self._stage(topic, exp.select(exp.null()).where(exp.false()), [], commit, counted=False)[0]

    def _columns_of(self, topic) -> list[tuple[str, str]]:
        if topic.key not in self._table_columns:
            self._table_columns[topic.key] = self.columns(topic.table)
        return self._table_columns[topic.key]

    def _location(self, topic) -> str:
        return self._directory(topic.table)

    def _directory(self, table: exp.Table) -> str:
        """A table's directory, read once (``delete_rows`` and dropping a topic forget it)."""
        key = self.sql(table)
        if key not in self._locations:
            self._locations[key] = self._table_location(table)
        return self._locations[key]

    def _table_location(self, table: exp.Table) -> str:
        """From the session's catalog in the JVM, one call; where it is out of reach (Spark Connect), a DESCRIBE
        EXTENDED: a query, about half a second in a new driver."""
        found = self._jvm_catalog(table)
        if found is not None:
            catalog, name = found
            with self._errors():
                # (written as DESCRIBE writes it: a path, not the URI, whose special characters are %-escaped)
                uri = catalog.getTableMetadata(name).location()
                return str(_java(self.spark, "org.apache.spark.sql.catalyst.catalog.CatalogUtils").URIToString(
                    uri)).rstrip("/")
        rows = self.fetchall(exp.Describe(this=table.copy(), style="EXTENDED"))
        return next(row[1] for row in rows if row[0] == "Location").rstrip("/")

    def delete_rows(self, table: exp.Table, condition: exp.Expression) -> None:
        """Parquet tables have no DELETE: the rows kept are written to a new directory beside the table's, which
        replaces it in one metastore operation (``ALTER TABLE SET LOCATION``); the old directory is removed after."""
        self._check_writable(None, f"a delete from {table.name}")
        name = self.sql(table)
        doomed = self.F.expr(self.sql(exp.func("coalesce", condition.copy(), exp.false())))
        old = self._directory(table)
        directory = f"{old.rsplit('/', 1)[0]}/{table.name}-{uuid.uuid4().hex}"
        with self._errors():       # one job: the rows kept are written, the rows deleted counted on the way
            observed = _Observed(self.spark.table(name).withColumn("__sd_doomed", doomed),
                                 doomed=self.F.count_if(self.F.col("__sd_doomed")))
            observed.frame.where("NOT __sd_doomed").drop("__sd_doomed").write.mode("error").parquet(directory)
            if not observed.values()["doomed"]:
                _remove(directory)      # nothing to delete: the table stays where it is
                return
        self.execute(exp.Alter(this=table.copy(), kind="TABLE",
                               actions=[exp.AlterSet(location=exp.Literal.string(directory))]))
        self._locations.pop(name, None)
        with self._errors():
            self.spark.catalog.refreshTable(name)
            self._delete(old, directory=True)

    def partition_ranges(self, topic) -> list[tuple[int, int]]:
        return [(unit.first, unit.last) for unit in self._layout(topic).units]

    #: Seconds a partition a compaction merged into another stays registered (pointing at an empty directory)
    #: before it is dropped, where other drivers write. Its number stays taken meanwhile: a driver whose state is
    #: older than that commit cannot register the number again (its compare-and-set fails), and publishes only
    #: within half this time of its last look at the topic (``listing_ttl``), so a number is never freed under it.
    COVERED_GRACE = 600.0

    @property
    def listing_ttl(self) -> float | None:
        return None if self.exclusive else self.COVERED_GRACE / 2

    def drop_merged(self, topic) -> int:
        """Where this process is the only writer, every covered partition, and the directories no partition reads
        (those a compaction cut short left, failed commits' rows) where the warehouse is local. Where other drivers
        write, the covered partitions older than COVERED_GRACE; two drivers may drop the same ones at once: the one
        that finds them gone leaves them to the other (a clean-up, not part of what it was doing)."""
        layout = self._layout(topic)
        covered = layout.covered
        if not self.exclusive:
            covered = [unit for unit in covered if _covered_since(unit) <= time.time() - self.COVERED_GRACE]
        try:
            self._drop_partitions(topic, [unit.last for unit in covered])
        except EngineError as error:
            if self.exclusive or not _moved_under(error):
                raise
            log.info("[%s] left the partitions a compaction merged to another driver dropping them: %s", topic.key,
                     error)
            return 0
        if layout.units:
            registered = layout.units + [unit for unit in layout.covered if unit not in covered]
            _remove_unread(self._location(topic), registered, 0.0 if self.exclusive else self.COVERED_GRACE)
        return len(covered)

    def merge_partitions(self, topic, ranges: list[tuple[int, int]]) -> int:
        """Four steps, the second the one that counts: (1) the rows of the partitions are written, in position
        order, to a new directory named for the commits it holds (``<last>-<attempt>-<n>-c<first>``, the attempt
        the last commit's winner); (2) in one metastore transaction (``_relocate``) the last partition is pointed at
        it and each of the others at an empty directory of its own: from then on every read, seqdedup's or any
        other tool's, sees each entry once; the others are *covered* (``_Layout``), their commits still published;
        (3) they are dropped (where other drivers write, once COVERED_GRACE has passed: ``drop_merged``); (4) the
        partitions' old directories are removed. Killed before (2), the new directory
        is an orphan nobody reads; after it, the next writer to open the topic drops what is left and removes the
        directories nobody reads (``drop_merged``). Where several drivers write, the winners of the commits merged
        are first added to COMMITS: their partitions, which named them, are going."""
        F = self.F

        self._check_writable(None, f"a compaction of {topic.key}")
        listed = {(unit.first, unit.last): unit for unit in self._layout(topic).units}
        if any(pair not in listed for pair in ranges):
            raise _changed_under(topic)
        units = [listed[pair] for pair in ranges]
        last = units[-1]
        if not self.exclusive:
            self._log_winners(topic, [unit for unit in units if unit.commits == 1])
        directory = (f"{self._location(topic)}/{STAGING}/{last.last}-{_attempt_of(last)}-{uuid.uuid4().hex[:8]}"
                     f"-c{units[0].first}")
        rows = exp.select(*[exp.column(name, quoted=True) for name, _ in self._columns_of(topic)]).from_(
            topic.table.copy()).where(exp.column("_commit").isin(*[exp.convert(unit.last) for unit in units]))
        foreign = F.expr(self.sql(exp.not_(written_by_seqdedup()))).cast("int")
        with self._errors():
            observed = _Observed(self._sql(rows), rows=F.count(F.lit(1)), foreign=F.sum(foreign))
            observed.frame.drop("_commit").orderBy("_position").write.mode("error").parquet(directory)
            got = observed.values()
        count, stray = got["rows"], got["foreign"]
        if stray:       # merged, they would share files with seqdedup's rows, which a quarantine moves whole
            _remove(directory)
            raise TopicError(f"{topic.key} holds {stray} rows seqdedup did not write in the partitions of commits "
                             f"{units[0].first} to {last.last}; nothing was merged. Move them aside first (`seqdedup "
                             f"topic quarantine {topic.key}`), then compact")
        failpoint("compact_after_write")
        if last not in self._layout(topic).units:
            _remove(directory)
            raise _changed_under(topic)
        token = f"{uuid.uuid4().hex[:8]}-e{int(time.time())}"     # (when they are covered: _covered_since)
        emptied = {unit.last: f"{self._location(topic)}/{STAGING}/{unit.last}-{_attempt_of(unit)}-{token}"
                   for unit in units[:-1]}
        for empty in emptied.values():
            if _local(empty):
                os.makedirs(_local(empty))
        self._relocate(topic, {last.last: directory, **emptied})
        failpoint("compact_after_switch")
        if self.exclusive:     # (elsewhere they stay registered, their numbers taken, for COVERED_GRACE)
            self._drop_partitions(topic, list(emptied))
        failpoint("compact_after_drop")
        if self.exclusive:     # (elsewhere another driver's query may be reading them: drop_merged, later)
            for unit in units:
                if unit.location:
                    _remove(unit.location)
        with self._errors():
            self.spark.catalog.refreshTable(self.sql(topic.table))
        return count

    def _relocate(self, topic, locations: dict[int, str]) -> None:
        """Point partitions (``_commit`` -> directory) at new directories, all at once: one call to the metastore,
        which alters them in one transaction, so that no read sees some moved and others not. Where the JVM is out
        of reach (Spark Connect), one ALTER TABLE per partition, the first one's last: a read in between sees the
        first's entries twice, as plain reads after a kill there would until the next writer opens the topic."""
        self._listing_changed(topic)
        table = topic.table
        with self._errors():
            found = self._jvm_catalog(table)
            if found is None:
                known = self._directories.setdefault(self.sql(table), {})
                for number, location in sorted(locations.items(), reverse=True):
                    switch = table.copy()
                    switch.set("partition", self._partition_spec(number))
                    known.pop(str(number), None)
                    self.execute(exp.Alter(this=switch, kind="TABLE", actions=[
                        exp.AlterSet(location=exp.Literal.string(location))]))
                    known[str(number)] = location
                return
            catalog, name = found
            converters = _java(self.spark, "scala.jdk.javaapi.CollectionConverters")
            moved = _java(self.spark, "java.util.ArrayList")()
            # (one listing: a metastore query per partition costs more)
            listed = catalog.listPartitions(name, _java(self.spark, "scala.Option").empty())
            for partition in converters.asJava(listed):
                value = partition.spec().apply("_commit")
                if value.isdigit() and int(value) in locations:
                    moved.add(_with_location(self.spark, partition, locations[int(value)]))
            if moved.size() != len(locations):
                raise EngineError(f"seqdedup could not find every partition it moves in {table.name} (found "
                                  f"{moved.size()} of {len(locations)}): nothing was moved; run it again")
            catalog.alterPartitions(name, converters.asScala(moved).toSeq())

    @staticmethod
    def _partition_spec(number: int) -> exp.Partition:
        return exp.Partition(expressions=[exp.column("_commit").eq(exp.convert(number))])

    def _drop_partitions(self, topic, numbers: list[int]) -> None:
        if numbers:
            self._listing_changed(topic)
            known = self._directories.get(self.sql(topic.table), {})
            for number in numbers:
                known.pop(str(number), None)
            self.execute(exp.Alter(this=topic.table.copy(), kind="TABLE", actions=[exp.DropPartition(
                exists=True, expressions=[self._partition_spec(number) for number in numbers])]))

    def _log_winners(self, topic, units: list[_Unit]) -> None:
        """Add to COMMITS the winners of these one-commit partitions that are not there yet (named by their
        directories, as ``_described`` reads them)."""
        logged = {n for (n,) in self.fetchall(exp.select("commit_id").from_(catalog_table("seqdedup_commits")).where(
            exp.column("topic").eq(exp.Literal.string(topic.key))))}
        missing = [unit for unit in units if unit.last not in logged and unit.location]
        if missing:
            rows = exp.values([(literal(topic.key), literal(unit.last), literal(_staging_name(unit.location)[1]))
                               for unit in missing], alias="w", columns=["topic", "commit_id", "attempt"])
            self.execute(exp.insert(exp.select("topic", "commit_id", "attempt", exp.cast(
                exp.func("current_timestamp"), "timestamp")).from_(rows), catalog_table("seqdedup_commits"),
                columns=list(COMMITS)))

    def move_foreign_rows(self, topic, side: exp.Table, now) -> int:
        """Spark has no transactions, so a move is three steps, each safe to repeat: (1) the files that hold
        foreign rows are copied whole into a new partition of ``side`` (written, then registered: one metastore
        operation), but for those a move cut short copied already (their ``_moved_from``); (2) the foreign
        partitions are dropped, their directories with them; (3) the foreign files left in seqdedup's partitions
        (an INSERT into one adds files to its directory) are deleted. Run again after a crash, it finishes the work
        and copies no file twice. (Parquet tables enforce no NOT NULL: a topic cannot refuse such rows.)"""
        F = self.F

        self._check_writable(None, f"a move of the foreign rows of {topic.key}")
        partitions = self.foreign_partitions(topic)
        foreign = exp.not_(written_by_seqdedup(foreign_commits(partitions)))
        file = F.col("_metadata.file_path")
        with self._errors():
            rows = self.spark.table(self.sql(topic.table))
            files = [row[0] for row in rows.where(F.expr(self.sql(foreign))).select(file).distinct().collect()]
            copied = set()
            if files and not self.columns(side):
                self._create_side_table(topic, side)
            elif files:
                copied = {row[0] for row in
                          self.spark.table(self.sql(side)).select("_moved_from").distinct().collect()}
            moved = self._copy_files(rows, [f for f in files if f not in copied], side, now)
        if partitions:
            drop = exp.DropPartition(exists=True, expressions=[
                exp.Partition(expressions=[exp.column("_commit").eq(exp.convert(int(v) if v.isdigit() else v))])
                for v in partitions])
            self.execute(exp.Alter(this=topic.table.copy(), kind="TABLE", actions=[drop]))
        with self._errors():
            for name in files:
                self._delete(name, directory=False)
            self.spark.catalog.refreshTable(self.sql(topic.table))
        return moved

    def _delete(self, uri: str, *, directory: bool) -> None:
        """Delete a file or a directory (and what it holds) of the warehouse: directly on a local file system, else
        through Hadoop's file system in the JVM, which a Spark Connect client cannot reach."""
        local = _local(urllib.parse.unquote(urllib.parse.urlsplit(uri).path) if uri.startswith("file:") else uri)
        if local:
            shutil.rmtree(local, ignore_errors=True) if directory else Path(local).unlink(missing_ok=True)
        elif self.remote:
            raise EngineError(f"seqdedup cannot delete {uri} from a Spark Connect session (no access to Hadoop's file "
                              "system): on a warehouse that is not on a local disk, run this with a classic "
                              "SparkSession; what it did so far stays correct, and running it again finishes it")
        else:
            path = _java(self.spark, "org.apache.hadoop.fs.Path")(_java(self.spark, "java.net.URI")(uri))
            path.getFileSystem(self.spark._jsc.hadoopConfiguration()).delete(path, directory)

    def _create_side_table(self, topic, side: exp.Table) -> None:
        """``side``: the topic's columns and FOREIGN_COLUMNS, partitioned by ``_move``."""
        extra = [exp.alias_(exp.cast(exp.null(), kind), name) for name, kind in FOREIGN_COLUMNS.items()]
        self.execute(exp.Create(
            this=side.copy(), kind="TABLE",
            expression=exp.select("*", *extra).from_(topic.table.copy()).where(exp.false()),
            properties=exp.Properties(expressions=[
                exp.FileFormatProperty(this=exp.Var(this="PARQUET")),
                exp.PartitionedByProperty(this=exp.Schema(expressions=[exp.to_identifier("_move")]))])))

    def _copy_files(self, rows, files: list[str], side: exp.Table, now) -> int:
        """Copy the rows of ``files`` (of the frame ``rows``) into a new partition of ``side``; how many."""
        F = self.F

        if not files:
            return 0
        move = max((int(value) for value, _ in self._partitions(side) if value.isdigit()), default=0) + 1
        directory = f"{self._table_location(side)}/{STAGING}/{move}-{uuid.uuid4().hex}"
        file = F.col("_metadata.file_path")
        observed = _Observed(rows.where(file.isin(files)).select(
            "*", file.alias("_moved_from"), F.expr(self.sql(literal(now))).alias("_moved_at")), rows=F.count(F.lit(1)))
        observed.frame.write.mode("error").parquet(directory)
        self.execute(exp.Alter(this=side.copy(), kind="TABLE", actions=[exp.AddPartition(
            this=exp.Partition(expressions=[exp.column("_move").eq(exp.convert(move))]),
            location=exp.LocationProperty(this=exp.Literal.string(directory)))]))
        return observed.values()["rows"]

    def drop_topic_table(self, topic) -> None:
        super().drop_topic_table(topic)
        self._locations.pop(self.sql(topic.table), None)
        self._storage.pop(self.sql(topic.table), None)
        self._open.pop(topic.key, None)

    def register_functions(self) -> None:
        """The guards as classes where the guard jar can be had (``spark_guards``: refused as Spark resolves the
        call, before its column-count check), else as SQL functions that fail when they run. A server that cannot
        load the jar (Spark Connect on another machine) gets the SQL functions."""
        if self.spark in _REGISTERED:
            return
        jar = guard_jar()
        for name, signatures in SIGNATURES.items():
            if jar is not None:
                try:
                    self.execute(guard_function(name, jar, temporary=True))
                    continue
                except EngineError:
                    jar = None
            longest = max(signatures, key=len)
            shortest = min(len(s) for s in signatures)
            params = ", ".join(f"{a} {'STRING' if a in ('producer', 'topic') else 'BIGINT'}"
                               + (" DEFAULT NULL" if i >= shortest else "") for i, a in enumerate(longest))
            message = exp.func("raise_error", exp.Literal.string(guard_message(name))).sql(dialect=self.DIALECT)
            self.execute(f"CREATE OR REPLACE TEMPORARY FUNCTION {name}({params}) RETURNS BOOLEAN RETURN {message}")
        body = exp.func("concat", exp.Literal.string("KOP-PID-PREFIX-"), exp.column("producer_id"),
                        exp.Literal.string("-"), exp.column("producer_epoch")).sql(dialect=self.DIALECT)
        self.execute("CREATE OR REPLACE TEMPORARY FUNCTION kafka_producer_name(producer_id BIGINT, "
                     f"producer_epoch BIGINT) RETURNS STRING RETURN {body}")
        _REGISTERED.add(self.spark)

    def keep_guards(self) -> None:
        """The guards as functions of the catalog's database in the metastore, so that a session that never called
        ``seqdedup.connect`` (another application, a notebook's ``%sql``) gets seqdedup's message for
        ``is_not_dup``, not UNRESOLVED_ROUTINE. They name the guard jar by its path on this machine: a session
        elsewhere that cannot read it gets Spark's error for the missing jar instead."""
        jar = guard_jar()
        if jar is None:
            return
        for name in SIGNATURES:
            try:
                self.execute(guard_function(name, jar, temporary=False))
            except EngineError as error:
                if not already_exists(error):      # (a catalog table added to an older catalog, another driver)
                    raise

    def file_rows(self, path: str, fmt: str, row_column: str) -> exp.Select:
        reader = self.spark.read
        frame = {"json": lambda: reader.json(path), "csv": lambda: reader.option("header", True)
                 .option("inferSchema", True).csv(path), "parquet": lambda: reader.parquet(path)}[fmt]()
        frame.createOrReplaceTempView("__sd_file")
        # File order: Spark reads a single file's rows in order; monotonically_increasing_id keeps that order.
        number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[
            exp.Ordered(this=exp.func("monotonically_increasing_id"))]))
        return exp.select("*", exp.alias_(number, row_column)).from_("__sd_file")

    def close(self) -> None:
        """The SparkSession stays up: it may be the user's, and starting one costs seconds."""
