"""The guards on Spark as JVM classes: ``is_not_dup`` (and the other rewritten functions) written straight into
``spark.sql``, a notebook's ``%sql`` cell or an application that never called ``seqdedup.connect`` fail with
seqdedup's message while Spark resolves the call.

A SQL function (``RETURN raise_error(...)``) fails only when it runs, and Spark checks an INSERT's column count
first: the statement a Spark user writes first, ``INSERT INTO events SELECT payload FROM staging WHERE
is_not_dup(producer, seq)``, got ``INSERT_COLUMN_ARITY_MISMATCH`` naming the topic's system columns. A function
backed by a class is resolved before that check (jvm/Guard.java, beside this module, says how it refuses).
Registered in the metastore too (``CREATE FUNCTION``), it answers every session on that metastore, where the name
was unresolved.

The classes are compiled here, once per machine and message, with the JDK's ``javac`` against pyspark's jars, into a
jar in the user's cache. Without a JDK the guards stay SQL functions, as before.

    >>> guard_class("last_sequence_id")
    'seqdedup.guards.LastSequenceId'
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import weakref
import zipfile
from pathlib import Path

from sqlglot import exp

from seqdedup.errors import EngineError, already_exists
from seqdedup.udfs.guards import SIGNATURES, guard_message

log = logging.getLogger("seqdedup.spark")

PACKAGE = "seqdedup.guards"
BASE = Path(__file__).with_name("jvm") / "Guard.java"
#: The SparkSessions seqdedup's temporary functions are registered in (they live as long as the session): a second
#: ``connect`` on one session does not register them again.
_REGISTERED: "weakref.WeakSet" = weakref.WeakSet()


def guard_class(name: str) -> str:
    """The JVM class of the guard for function ``name``."""
    return f"{PACKAGE}.{''.join(part.title() for part in name.split('_'))}"


def sources() -> dict[str, str]:
    """Java file name -> source: the base class, and a subclass per function carrying its message (a JSON string
    is a valid Java string literal)."""
    files = {BASE.name: BASE.read_text()}
    for name in SIGNATURES:
        simple = guard_class(name).rsplit(".", 1)[1]
        files[f"{simple}.java"] = (f"package {PACKAGE};\n\n/** The guard of {name}(). */\n"
                                   f"public final class {simple} extends Guard {{\n"
                                   f"    public {simple}() {{ super({json.dumps(guard_message(name))}); }}\n}}\n")
    return files


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seqdedup" / "jvm"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def _spark_jars() -> Path | None:
    """The folder of Spark's jars: pyspark's own, or ``$SPARK_HOME/jars``."""
    try:
        import pyspark
    except ImportError:
        return None
    for folder in (Path(pyspark.__file__).parent / "jars", Path(os.environ.get("SPARK_HOME", "/nonexistent")) / "jars"):
        if any(folder.glob("spark-sql-api_*.jar")):
            return folder
    return None


def guard_function(name: str, jar: Path, *, temporary: bool) -> exp.Create:
    """The statement that makes function ``name`` the guard of ``jar``: temporary (``CREATE OR REPLACE``), or kept
    in the current database of the metastore (plain ``CREATE``: one metastore call, where IF NOT EXISTS asks first;
    the caller takes "already exists" as done).

    Example:
        >>> print(guard_function("is_not_dup", Path("/a b/g.jar"), temporary=True).sql("spark"))
        CREATE OR REPLACE TEMPORARY FUNCTION is_not_dup AS 'seqdedup.guards.IsNotDup' USING JAR 'file:///a%20b/g.jar'
    """
    properties = [exp.TemporaryProperty()] if temporary else []
    properties.append(exp.UsingProperty(this=exp.Literal.string(jar.as_uri()), kind="JAR"))
    return exp.Create(this=exp.table_(name), kind="FUNCTION", replace=temporary,
                      expression=exp.Literal.string(guard_class(name)),
                      properties=exp.Properties(expressions=properties))


@functools.cache
def guard_jar() -> Path | None:
    """The jar of the guard classes, built on first use (a few seconds) and kept; None where it cannot be built (no
    JDK, no Spark jars, a cache that cannot be written), said once in the ``seqdedup.spark`` log."""
    files = sources()
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    jar = _cache() / f"guards-{digest}.jar"
    if jar.is_file():
        return jar
    javac, spark_jars = _javac(), _spark_jars()
    if javac is None or spark_jars is None:
        log.info("seqdedup: %s, so is_not_dup written straight into Spark SQL fails only when it runs (a statement "
                 "that inserts fewer columns than the topic has gets Spark's column-count error first); install a JDK "
                 "to have it refused with seqdedup's message", "no javac" if javac is None else "no Spark jars")
        return None
    try:
        with tempfile.TemporaryDirectory(prefix="seqdedup-guards-") as work:
            work = Path(work)
            for name, text in files.items():
                (work / name).write_text(text)
            classes = work / "classes"
            subprocess.run([javac, "--release", "17", "-nowarn", "-cp", str(spark_jars / "*"), "-d", str(classes),
                            *(str(work / name) for name in files)], check=True, capture_output=True, text=True,
                           timeout=300)
            jar.parent.mkdir(parents=True, exist_ok=True)
            partial = jar.with_name(f"{jar.name}.{os.getpid()}.partial")
            with zipfile.ZipFile(partial, "w") as archive:
                for path in sorted(classes.rglob("*.class")):
                    archive.write(path, path.relative_to(classes).as_posix())
            partial.replace(jar)        # whole or absent, where several processes build it at once
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", None) or error
        log.info("seqdedup: the guard classes could not be built (%s); is_not_dup in Spark SQL stays a SQL function",
                 detail)
        return None
    return jar


def register_functions(adapter) -> None:
    """Register the guards in ``adapter``'s session: as classes where the guard jar can be had (``guard_jar``:
    refused as Spark resolves the call, before its column-count check), else as SQL functions that fail when they
    run. A server that cannot load the jar (Spark Connect on another machine) gets the SQL functions."""
    if adapter.spark in _REGISTERED:
        return
    jar = guard_jar()
    for name, signatures in SIGNATURES.items():
        if jar is not None:
            try:
                adapter.execute(guard_function(name, jar, temporary=True))
                continue
            except EngineError:
                jar = None
        longest = max(signatures, key=len)
        shortest = min(len(s) for s in signatures)
        params = ", ".join(f"{a} {'STRING' if a in ('producer', 'topic') or a.startswith('key') else 'BIGINT'}"
                           + (" DEFAULT NULL" if i >= shortest else "") for i, a in enumerate(longest))
        message = exp.func("raise_error", exp.Literal.string(guard_message(name))).sql(dialect=adapter.DIALECT)
        adapter.execute(f"CREATE OR REPLACE TEMPORARY FUNCTION {name}({params}) RETURNS BOOLEAN RETURN {message}")
    body = exp.func("concat", exp.Literal.string("KOP-PID-PREFIX-"), exp.column("producer_id"),
                    exp.Literal.string("-"), exp.column("producer_epoch")).sql(dialect=adapter.DIALECT)
    adapter.execute("CREATE OR REPLACE TEMPORARY FUNCTION kafka_producer_name(producer_id BIGINT, "
                 f"producer_epoch BIGINT) RETURNS STRING RETURN {body}")
    _REGISTERED.add(adapter.spark)

def keep_guards(adapter) -> None:
    """Keep the guards as functions of the catalog's database in the metastore, so that a session that never called
    ``seqdedup.connect`` (another application, a notebook's ``%sql``) gets seqdedup's message for
    ``is_not_dup``, not UNRESOLVED_ROUTINE. They name the guard jar by its path on this machine: a session
    elsewhere that cannot read it gets Spark's error for the missing jar instead."""
    jar = guard_jar()
    if jar is None:
        return
    for name in SIGNATURES:
        try:
            adapter.execute(guard_function(name, jar, temporary=False))
        except EngineError as error:
            if not already_exists(error):      # (a catalog table added to an older catalog, another driver)
                raise
