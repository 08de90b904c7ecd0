"""Starting a SparkSession for seqdedup: a local one with a Hive catalog (an embedded Derby metastore in its home,
locked for one process, or a shared metastore), its settings, and the Java options that keep its log quiet."""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
import time
from pathlib import Path

from seqdedup.errors import EngineError

from .calls import SETTINGS
from .frames import is_remote

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
        lock_home(home, lock_timeout)
        settings = derby_settings(home)
    else:
        if POSTGRESQL_JAR in os.environ.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep):
            # already at the end of the class path: added in front too, it would change the class path that a
            # class-data archive was written for (tests/jvm.py), and the JVM would start without the archive
            del settings["spark.driver.extraClassPath"]
    builder = (
        SparkSession.builder.master(master).appName("seqdedup").enableHiveSupport()
        .config("spark.ui.showConsoleProgress", "false")
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
    metastore's aside: no web UI, two shuffle partitions (small data, two cores), its files in ``home``, and the
    runtime settings seqdedup's calls need (``calls.SETTINGS``) from the start: on a session without them, each call
    sets them and puts them back, several engine round trips a call (a 1,000-row ``foreachBatch`` micro-batch paid
    about 0.2 s a batch for it)."""
    return {**SETTINGS, "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
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
LOG4J2 = Path(__file__).with_name("log4j2.properties")
#: A Java option or setting that names a log4j configuration: log4j2's ``log4j2.configurationFile``, its older
#: spelling ``log4j.configurationFile``, log4j 1's ``log4j.configuration``.
_LOG4J_OPTION = re.compile(r"log4j2?\.configuration", re.I)
#: The names log4j2 looks for on the class path (Spark's configuration folder is on it).
_LOG4J_FILE = re.compile(r"log4j2(-test)?\.(properties|xml|json|jsn|ya?ml)")


def quiet_java_options(options: str = "", chosen: str = "") -> str:
    """``spark.driver.extraJavaOptions`` for a driver seqdedup starts: ``options`` with seqdedup's log4j2
    configuration (log4j2.properties, beside this module) added, which logs errors only from the JVM's start, where
    Spark's defaults print WARN lines before ``spark.log.level`` applies. ``options`` stay as they are where the user
    has chosen a log4j configuration (``user_log4j`` of ``options`` and ``chosen``, the user's other Java options).

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


#: The homes this process holds, path -> the open lock file (a lock lives as long as its file stays open).
homes: dict[Path, object] = {}



def lock_home(home: Path, timeout: float | None) -> None:
    if home in homes:
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
    homes[home] = file




def refuse_without_hive(spark) -> None:
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
    if is_remote(spark):
        fix = ("start the Spark Connect server with --conf spark.sql.catalogImplementation=hive, or let seqdedup "
               "start a local server with a Hive catalog: seqdedup connect-server")
    else:
        fix = ("build the session with SparkSession.builder.enableHiveSupport(), or let seqdedup start a local "
               'session with a Hive catalog: seqdedup.connect(engine="spark")')
    raise EngineError(f"seqdedup needs a SparkSession with a Hive catalog, and this one's catalog is {catalog!r} "
                      "(spark.sql.catalogImplementation): topics and their state are partitioned tables that must "
                      "outlive the session, and Spark's in-memory catalog forgets them when it ends. To fix it, "
                      f"{fix}. Nothing was created.")
