"""The folders depend one way (udfs <- catalog <- sql <- extensions <- seqdedup/core <- seqdedup/clients <- seqdedup),
the lower ones taking only errors, failpoints and bounded caches from the root package, and only extensions/ imports
an engine;
no module imports itself through others; ``import seqdedup`` works without pyspark. An import for annotations only
(under ``if TYPE_CHECKING:``) is no dependency: a client is handed the ``Session`` facade it is annotated with."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The folders, lowest first; each is a package of seqdedup's (pyproject.toml's package-dir), the root last.
LAYERS = ["udfs", "catalog", "sql", "extensions", "seqdedup/core", "seqdedup/clients", "seqdedup"]
PACKAGE = {folder: "seqdedup" if folder == "seqdedup" else f"seqdedup.{folder.removeprefix('seqdedup/')}"
           for folder in LAYERS}
#: What every layer may import from the root package: the errors it raises, the crash tests' failpoints and the
#: bounded caches of what the statement path makes once per shape.
SHARED = ("seqdedup.errors", "seqdedup.failpoints", "seqdedup.kept")


def _sources():
    """Each source file of seqdedup's, with its layer's rank and folder and the package that holds it."""
    for rank, folder in enumerate(LAYERS):
        for path in (ROOT / folder).rglob("*.py"):
            if any(inner != folder and path.is_relative_to(ROOT / inner) and inner.startswith(f"{folder}/")
                   for inner in LAYERS):
                continue        # (a package of the root's is a layer of its own)
            yield rank, folder, path, ".".join([PACKAGE[folder], *path.relative_to(ROOT / folder).parts[:-1]])


def _imported(node: ast.ImportFrom, package: str) -> str:
    """The module ``from ... import`` names, its relative form resolved against ``package``."""
    if not node.level:
        return node.module
    parts = package.split(".")
    return ".".join(filter(None, [".".join(parts[:len(parts) - node.level + 1]), node.module]))


def _imports(path: pathlib.Path, package: str) -> set[str]:
    """Every module ``path`` imports, in functions too, its relative imports resolved against ``package``."""
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            # (``from . import leases``: the names are modules)
            found |= {_imported(node, package)} if node.module else {f"{_imported(node, package)}.{a.name}"
                                                                     for a in node.names}
    return found


def _rank(module: str) -> int | None:
    """The layer of a module of seqdedup's (the most specific package that holds it); None for any other module
    and for the root's modules every layer may import."""
    if module.startswith(SHARED):
        return None
    held = [rank for rank, folder in enumerate(LAYERS)
            if module == PACKAGE[folder] or module.startswith(PACKAGE[folder] + ".")]
    return min(held, default=None)


def test_layers_import_only_downwards_and_only_errors_failpoints_and_caches_from_the_root():
    imports = 0
    for rank, folder, path, package in _sources():
        for module in _imports(path, package):
            imports += 1
            above = _rank(module)
            assert above is None or above <= rank, f"{path.relative_to(ROOT)} imports {module}, a layer above"
            if folder != "extensions":
                assert module.split(".")[0] not in ("duckdb", "pyspark"), f"{path} imports the engine {module}"
    assert imports > 500        # (the walk found the sources)


def _module_level_imports() -> dict[str, set[str]]:
    """Each module of seqdedup's, by name, and the modules of seqdedup's it imports when it is loaded (not in a
    function, not for annotations only). ``from . import x`` is the submodule x, not the package it is in."""
    modules = {package if path.stem == "__init__" else f"{package}.{path.stem}": (path, package)
               for _, _, path, package in _sources()}
    graph = {}
    for name, (path, package) in modules.items():
        found = set()
        for statement in ast.parse(path.read_text()).body:
            if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
                continue
            for node in ast.walk(statement) if isinstance(statement, (ast.If, ast.Try)) else [statement]:
                if isinstance(node, ast.Import):
                    found |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    module = _imported(node, package)
                    submodules = {f"{module}.{a.name}" for a in node.names} & modules.keys()
                    found |= submodules if submodules and node.module is None else {module, *submodules}
        graph[name] = found & modules.keys()
    return graph


def test_no_module_imports_itself_through_others():
    graph = _module_level_imports()
    assert len(graph) > 100         # (the walk found the modules)

    def reaches(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph[module]
        return seen

    cycles = sorted(module for module in graph if module in reaches(module))
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_import_seqdedup_without_pyspark_or_duckdb_loaded():
    code = ("import sys; sys.modules['pyspark'] = None; import seqdedup; "
            "assert 'duckdb' not in sys.modules and sys.modules['pyspark'] is None; print('ok')")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
