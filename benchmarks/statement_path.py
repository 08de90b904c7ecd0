#!/usr/bin/env python3
"""The path of one small statement through the layers (issue 42; docs/architecture.md): on a warm DuckDB session, a
10-entry ``INSERT ... WHERE is_not_dup(...)`` is traced with ``sys.setprofile`` and counted:

- the project's Python calls (functions of seqdedup's own files), and the switches between its modules (a call or a
  return that moves from one module to another: how often the reader of the path changes files);
- the engine round trips: the SQL statements sent to DuckDB (``DuckDBAdapter._run`` and ``fetch_arrow``, the two
  places that hand SQL to the connection; its methods are native and invisible to a profile hook), and the Arrow
  tables registered with it (``register``);
- the modules and pairs of modules that take the most of it.

The counts are the statement's, not a clock's: they do not depend on the machine. Printed as ``key=value`` lines.

    python benchmarks/statement_path.py [--statements 5]
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The project's folders, whose files are seqdedup's own (pyproject.toml's package-dir).
FOLDERS = [ROOT / name for name in ("seqdedup", "catalog", "sql", "udfs", "extensions")]
#: The adapter's functions that send SQL to DuckDB (each call one statement), and those that register Arrow data.
SENDS_SQL = {"_run", "fetch_arrow"}
REGISTERS = {"load_arrow", "relation", "append_rows"}
STATEMENT = "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)"


def module_of(filename: str) -> str | None:
    """The project's module a file is (``sql/plan/window.py``), or None for any other file."""
    path = pathlib.Path(filename)
    for folder in FOLDERS:
        if path.is_relative_to(folder):
            return str(path.relative_to(ROOT))
    return None


class Tracer:
    def __init__(self):
        self.calls = 0
        self.switches = collections.Counter()       # (module, module) -> switches between them, either way
        self.modules = collections.Counter()        # module -> calls of its functions
        self.round_trips = 0
        self.registered = 0
        self.stack: list[str | None] = []           # the module of each frame, innermost last (project or not)

    def __call__(self, frame, event, arg):
        if event == "call":
            module = module_of(frame.f_code.co_filename)
            caller = next((m for m in reversed(self.stack) if m is not None), None)
            self.stack.append(module)
            if module is None:
                return
            self.calls += 1
            self.modules[module] += 1
            if module == "extensions/duckdb.py":
                self.round_trips += frame.f_code.co_name in SENDS_SQL
                self.registered += frame.f_code.co_name in REGISTERS
            if caller is not None and caller != module:
                self.switches[tuple(sorted((caller, module)))] += 1
        elif event == "return" and self.stack:
            self.stack.pop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--statements", type=int, default=5, help="warm-up statements before the one traced")
    args = ap.parse_args()
    import seqdedup

    with tempfile.TemporaryDirectory() as tmp:
        session = seqdedup.connect(f"{tmp}/path.duckdb")
        session.create_topic("events", {"payload": "STRING"})

        def stage(first: int) -> None:
            session.sql("CREATE OR REPLACE TEMPORARY VIEW staging AS SELECT concat('p', CAST(i % 3 AS STRING)) AS "
                        f"producer, CAST({first} + i AS BIGINT) AS seq, 'payload' AS payload FROM range(10) AS r(i)")

        for n in range(args.statements):        # warm: the topic's state in memory, the statement's shape kept
            stage(n * 10)
            session.sql(STATEMENT)
        stage(args.statements * 10)
        tracer = Tracer()
        sys.setprofile(tracer)
        try:
            result = session.sql(STATEMENT)
        finally:
            sys.setprofile(None)
        assert result.written == 10, result
        session.close()
    switches = sum(tracer.switches.values())
    print(f"engine=duckdb entries=10 warm_statements={args.statements}")
    print(f"python_calls={tracer.calls} module_switches={switches} calls_per_switch={tracer.calls / switches:.1f} "
          f"engine_sql_statements={tracer.round_trips} arrow_registrations={tracer.registered} "
          f"modules={len(tracer.modules)}")
    for module, calls in tracer.modules.most_common(8):
        print(f"module={module} calls={calls}")
    for (one, other), count in tracer.switches.most_common(6):
        print(f"pair={one}|{other} switches={count}")


if __name__ == "__main__":
    main()
