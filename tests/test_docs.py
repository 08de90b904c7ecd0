"""Every doctest in the package is its specification: run them all."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import seqdedup

MODULES = sorted(m.name for m in pkgutil.walk_packages(seqdedup.__path__, "seqdedup."))
MODULES += ["seqdedup"] + sorted(
    m.name for pkg in ("seqdedup.udfs", "seqdedup.catalog", "seqdedup.sql", "seqdedup.extensions")
    for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, f"{pkg}."))
MODULES = sorted(set(MODULES) - {"seqdedup.__main__"})


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL)
    assert result.failed == 0


def test_the_quick_start_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/index.md's Python example prints what its comments say."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "index.md").read_text()
    block = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/index.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    promised = re.findall(r"# (\d+(?: \d+)?)(?::|$)", block, re.M)
    assert printed[:3] == promised[:3]


def test_no_doc_says_positions_are_dense():
    """docs/semantics.md's rule: positions are unique and grow in commit order, but numbers are skipped (a statement
    numbers its entries without a sort of them all). A page that promised 1, 2, 3, ... would have users count on it."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    promises = [f"{page.relative_to(root)}: {found}" for page in [root / "README.md", *(root / "docs").rglob("*.md")]
                for found in re.findall(r"[^.|]*\b(?:positions? (?:are|is) dense|dense \(1, 2, 3)[^.|]*",
                                        page.read_text())]
    assert promises == []
