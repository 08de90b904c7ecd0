"""The folders depend one way (udfs <- catalog <- sql <- extensions <- seqdedup), and only extensions/ imports an
engine; ``import seqdedup`` works without pyspark."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ["udfs", "catalog", "sql", "extensions", "seqdedup"]
PACKAGE = {"udfs": "seqdedup.udfs", "catalog": "seqdedup.catalog", "sql": "seqdedup.sql",
           "extensions": "seqdedup.extensions"}


def _imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_layers_import_only_downwards():
    for rank, folder in enumerate(LAYERS):
        for path in (ROOT / folder).rglob("*.py"):
            for module in _imports(path):
                for above in LAYERS[rank + 1:]:
                    name = PACKAGE.get(above)
                    assert not (name and module.startswith(name)), f"{path} imports {module} from a layer above"
                if folder != "extensions":
                    assert module.split(".")[0] not in ("duckdb", "pyspark"), f"{path} imports the engine {module}"


def test_import_seqdedup_without_pyspark_or_duckdb_loaded():
    code = ("import sys; sys.modules['pyspark'] = None; import seqdedup; "
            "assert 'duckdb' not in sys.modules and sys.modules['pyspark'] is None; print('ok')")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
