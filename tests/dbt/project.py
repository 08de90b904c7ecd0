"""The example dbt project (examples/dbt), copied for a test and run for real: dbt in process (dbtRunner), or in a
process of its own for the kill tests."""
from __future__ import annotations

import contextlib

import csv
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dbt"
PACKAGE = ROOT / "dbt"

#: What ``Project.dbt_session_process`` runs.
SESSION_PROCESS = """
import json, sys
from dbt.cli.main import dbtRunner

runner = dbtRunner()
for arguments in json.loads(sys.argv[1]):
    outcome = runner.invoke(arguments)
    results = {r.node.name: [str(r.status), r.message, r.failures] for r in getattr(outcome.result, "results", [])}
    print("RESULTS", arguments[0], json.dumps(results), flush=True)
    if not outcome.success:
        sys.exit(1)
"""

#: The seed's columns, in order.
SEED_COLUMNS = ["producer", "seq", "arrival", "reading", "unit", "recorded_at"]


@dataclass
class Project:
    """A copy of the example project in ``path``, on one target, with its own database and target folder."""

    path: Path
    target: str = "duckdb"
    environment: dict[str, str] = field(default_factory=dict)    # the env_var()s of profiles.yml

    @classmethod
    def copy(cls, tmp: Path, target: str = "duckdb", **environment: str) -> "Project":
        path = tmp / "project"
        shutil.copytree(EXAMPLE, path, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", "*.duckdb"))
        # The package from this checkout, wherever the copy is.
        (path / "packages.yml").write_text(f"packages:\n  - local: {PACKAGE}\n")
        environment.setdefault("SEQDEDUP_EXAMPLE_DUCKDB", str(tmp / "example.duckdb"))
        environment.setdefault("DBT_TARGET_PATH", str(tmp / "target"))
        project = cls(path, target, environment)
        assert project.dbt("deps").success
        return project

    @property
    def database(self) -> str:
        return self.environment["SEQDEDUP_EXAMPLE_DUCKDB"]

    def arguments(self, *args: str) -> list[str]:
        return [*args, "--project-dir", str(self.path), "--profiles-dir", str(self.path), "--target", self.target]

    def dbt(self, *args: str):
        """``dbt <args>`` in this process (dbtRunner); its dbtRunnerResult."""
        from dbt.cli.main import dbtRunner

        saved = {k: os.environ.get(k) for k in self.environment}
        os.environ.update(self.environment)
        try:
            return dbtRunner().invoke(self.arguments(*args, "--no-use-colors") if args[0] != "deps" else
                                      [*args, "--project-dir", str(self.path), "--profiles-dir", str(self.path)])
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def dbt_process(self, *args: str, **environment: str) -> subprocess.CompletedProcess:
        """``dbt <args>`` as a process of its own, leading its own process group (so a failpoint's SIGKILL takes
        only it down)."""
        dbt = Path(sys.executable).with_name("dbt")
        return subprocess.run([str(dbt), *self.arguments(*args)], env={**os.environ, **self.environment,
                                                                      **environment},
                              capture_output=True, text=True, timeout=600, start_new_session=True)

    def dbt_session_process(self, *commands: list[str]) -> subprocess.CompletedProcess:
        """dbt's commands one after another in one process of its own (dbtRunner, as a scheduler runs dbt), run in
        the project's folder as a user would: on Spark, one JVM for them all. Each invocation prints a line
        ``RESULTS <command> {node: [status, message, failures]}``; the process stops at the first that fails."""
        commands_json = json.dumps([self.arguments(*command) for command in commands])
        return subprocess.run([sys.executable, "-c", SESSION_PROCESS, commands_json], cwd=self.path,
                              env={**os.environ, **self.environment}, capture_output=True, text=True, timeout=900,
                              start_new_session=True)

    def results(self, outcome) -> dict[str, object]:
        """Node name -> its result (status, message, adapter_response) of a dbt invocation."""
        return {r.node.name: r for r in outcome.result.results}

    def model(self, name: str, text: str) -> None:
        (self.path / "models" / f"{name}.sql").write_text(text)

    @contextlib.contextmanager
    def models(self, **texts: str):
        """These models (name=SQL) in the project while the block runs."""
        for name, text in texts.items():
            self.model(name, text)
        try:
            yield
        finally:
            for name in texts:
                (self.path / "models" / f"{name}.sql").unlink()

    def seed(self, rows: list[tuple]) -> None:
        """Replace the seed's rows (producer, seq, arrival, reading, unit, recorded_at); None is an empty cell."""
        with open(self.path / "seeds" / "raw_events.csv", "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(SEED_COLUMNS)
            writer.writerows(["" if v is None else v for v in row] for row in rows)

    def seed_rows(self) -> list[tuple]:
        with open(self.path / "seeds" / "raw_events.csv", newline="") as file:
            return [tuple(row) for row in list(csv.reader(file))[1:]]


def duckdb_rows(database: str, query: str) -> list[tuple]:
    """Rows of a query on the project's DuckDB file (read in this process, as dbt left it)."""
    import duckdb

    connection = duckdb.connect(database)
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()
