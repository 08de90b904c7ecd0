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
    if done.returncode != 0 or "completed successfully" not in done.stdout:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        raise EngineError("could not create the Hive metastore's schema in "
                          f"{metastore.split('?')[0]}: {' / '.join(lines[-3:])}")


__all__ = ["create_schema"]
