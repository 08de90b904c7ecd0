"""The schema of a shared Hive metastore database, created whole before any driver uses it.

Spark's built-in Hive 2.3 metastore can create its schema itself, lazily (``datanucleus.schema.autoCreateAll``), but
on PostgreSQL the first ``CREATE TABLE`` then hangs: one of the metastore's two connections waits to add a foreign
key to ``TBLS`` while the other holds a transaction open on it. So ``create_schema`` creates every table at once,
with the tool of the metastore's own persistence layer (DataNucleus' SchemaTool, shipped in pyspark's jars) and the
table mapping shipped in Hive's metastore jar (``package.jdo``). Both come with pyspark; only the JDBC driver does
not (Debian's ``libpostgresql-jdbc-java``).
"""
from __future__ import annotations

import subprocess
import tempfile
import zipfile
from pathlib import Path

from seqdedup.errors import EngineError

from .session import POSTGRESQL_JAR, metastore_settings


def _jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def create_schema(metastore: str, *, timeout: float = 300) -> None:
    """Create the Hive metastore's tables in the empty PostgreSQL database ``metastore`` (a JDBC URL, as for
    ``local_session``); a database that has them already is left as it is."""
    settings = metastore_settings(metastore)
    if not Path(POSTGRESQL_JAR).exists():
        raise EngineError(f"PostgreSQL's JDBC driver is not at {POSTGRESQL_JAR}: install Debian's "
                          "libpostgresql-jdbc-java (./dev installs it)")
    jars = _jars()
    mapping = next(jars.glob("hive-metastore-*.jar"))
    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(mapping) as jar:
            jar.extract("package.jdo", folder)
        properties = Path(folder) / "metastore.properties"
        properties.write_text("\n".join(f"{key.removeprefix('spark.hadoop.')}={value}" for key, value in {
            **{k: v for k, v in settings.items() if k.startswith("spark.hadoop.javax.jdo")},
            # the names Hive's metastore uses (identifiers as Hive writes them, its id tables)
            "datanucleus.identifierFactory": "datanucleus1",
            "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
        }.items()) + "\n")
        done = subprocess.run(
            ["java", "-cp", f"{jars}/*:{POSTGRESQL_JAR}", "org.datanucleus.store.schema.SchemaTool", "-create",
             "-api", "JDO", "-props", str(properties), str(Path(folder) / "package.jdo")],
            capture_output=True, text=True, timeout=timeout)
        created = done.returncode == 0 and "completed successfully" in done.stdout
        if created:
            done = _sequence_table(settings, jars, Path(folder), timeout)
            created = done.returncode == 0 and "ERROR" not in done.stdout     # (ij says so on stdout, exit 0)
    if not created:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        raise EngineError("could not create the Hive metastore's schema in "
                          f"{metastore.split('?')[0]}: {' / '.join(lines[-3:])}")


def _sequence_table(settings: dict, jars: Path, folder: Path, timeout: float) -> subprocess.CompletedProcess:
    """DataNucleus' id table (``SEQUENCE_TABLE``, which SchemaTool leaves out), created with the SQL tool Derby
    ships (``ij``, any JDBC database): otherwise the first drivers to create a table at once each try to create it
    too, and the losers log the database's error with a stack trace (harmless, and alarming)."""
    option = "spark.hadoop.javax.jdo.option."
    properties = folder / "ij.properties"
    properties.write_text("\n".join(f"{key}={value}" for key, value in {
        "ij.driver": settings[option + "ConnectionDriverName"], "ij.protocol": "",
        "ij.database": settings[option + "ConnectionURL"], "ij.user": settings.get(option + "ConnectionUserName"),
        "ij.password": settings.get(option + "ConnectionPassword")}.items() if value is not None) + "\n")
    script = folder / "sequence_table.sql"
    script.write_text('CREATE TABLE IF NOT EXISTS "SEQUENCE_TABLE" ("SEQUENCE_NAME" VARCHAR(255) NOT NULL PRIMARY KEY, '
                      '"NEXT_VAL" BIGINT NOT NULL);\n')
    derby = ":".join(str(jar) for name in ("derbytools", "derbyshared", "derby") for jar in jars.glob(f"{name}-*.jar"))
    return subprocess.run(["java", "-cp", f"{derby}:{POSTGRESQL_JAR}", "org.apache.derby.tools.ij", "-p",
                           str(properties), str(script)], capture_output=True, text=True, timeout=timeout)


__all__ = ["create_schema"]
