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
    ships (``ij``, any JDBC database), with a row for each class of the mapping: otherwise the first drivers to
    create a table at once each try to create it too, and where it exists, the first drivers to create their
    ``default`` database at once each insert the row of its class (``MDatabase``); the losers log the database's
    error with a stack trace (harmless, and alarming: seen in CI on 2026-12-05). A row starts at 1, as DataNucleus
    starts one it adds; a row already there is left as it is."""
    option = "spark.hadoop.javax.jdo.option."
    properties = folder / "ij.properties"
    properties.write_text("\n".join(f"{key}={value}" for key, value in {
        "ij.driver": settings[option + "ConnectionDriverName"], "ij.protocol": "",
        "ij.database": settings[option + "ConnectionURL"], "ij.user": settings.get(option + "ConnectionUserName"),
        "ij.password": settings.get(option + "ConnectionPassword")}.items() if value is not None) + "\n")
    script = folder / "sequence_table.sql"
    rows = "".join(_id_row(name) + ";\n" for name in _mapped_classes(folder / "package.jdo"))
    script.write_text('CREATE TABLE IF NOT EXISTS "SEQUENCE_TABLE" ("SEQUENCE_NAME" VARCHAR(255) NOT NULL PRIMARY KEY, '
                      '"NEXT_VAL" BIGINT NOT NULL);\n' + rows)
    derby = ":".join(str(jar) for name in ("derbytools", "derbyshared", "derby") for jar in jars.glob(f"{name}-*.jar"))
    return subprocess.run(["java", "-cp", f"{derby}:{POSTGRESQL_JAR}", "org.apache.derby.tools.ij", "-p",
                           str(properties), str(script)], capture_output=True, text=True, timeout=timeout)


def _mapped_classes(mapping: Path) -> list[str]:
    """The full names of the classes Hive's metastore maps (``package.jdo``) whose ids DataNucleus draws from
    ``SEQUENCE_TABLE``: those of datastore identity (the default), not embedded ones."""
    import xml.etree.ElementTree as ElementTree

    return [f"{package.get('name')}.{mapped.get('name')}" for package in ElementTree.parse(mapping).iter("package")
            for mapped in package.iter("class")
            if mapped.get("identity-type", "datastore") == "datastore" and mapped.get("embedded-only") != "true"]


def _id_row(name: str) -> str:
    r"""SQL: the id row of class ``name``, starting at 1, unless it is there.

    Example:
        >>> print(_id_row("m.MDatabase").replace(" WHERE", "\nWHERE"))
        INSERT INTO "SEQUENCE_TABLE" ("SEQUENCE_NAME", "NEXT_VAL") SELECT 'm.MDatabase', 1
        WHERE NOT EXISTS(SELECT 1 FROM "SEQUENCE_TABLE"
        WHERE "SEQUENCE_NAME" = 'm.MDatabase')
    """
    from sqlglot import exp

    table, key = exp.to_table('"SEQUENCE_TABLE"', dialect="postgres"), exp.column("SEQUENCE_NAME", quoted=True)
    there = exp.select("1").from_(table.copy()).where(key.eq(exp.Literal.string(name)))
    row = exp.select(exp.Literal.string(name), exp.Literal.number(1)).where(exp.not_(exp.Exists(this=there)))
    columns = [exp.to_identifier(c, quoted=True) for c in ("SEQUENCE_NAME", "NEXT_VAL")]
    return exp.insert(row, table, columns=columns).sql("postgres")


__all__ = ["create_schema"]
