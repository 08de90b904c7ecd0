"""What a user deciding whether to adopt seqdedup looks at first: the license, the author and the classifiers that
``pip show`` prints, the LICENSE and CHANGELOG beside the code, a wheel that ships ``py.typed`` and every module of
the source tree, and a public API whose functions say what they return."""
from __future__ import annotations

import importlib.metadata
import inspect
import re
import shutil
import subprocess
import sys
import typing
import zipfile
from pathlib import Path

import pytest

import seqdedup
from seqdedup.clients.kafka import KafkaResult
from seqdedup.clients.producer import Producer
from seqdedup.core.results import Done, QueryResult, StatementResult
from seqdedup.session import Session

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from: the build's files and the folders pyproject.toml maps to packages (the layers).
BUILD_FILES = ("pyproject.toml", "README.md", "LICENSE")
PACKAGE_FOLDERS = ("seqdedup", "udfs", "catalog", "sql", "extensions")


def _says_what_a_user_looks_for(metadata) -> None:
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Author"] == "seqdedup maintainers"
    assert "LICENSE" in metadata.get_all("License-File")
    classifiers = metadata.get_all("Classifier")
    assert {"Typing :: Typed", "Topic :: Database", "Programming Language :: SQL"} <= set(classifiers), classifiers


def test_the_installed_distribution_says_its_license_author_and_classifiers():
    metadata = importlib.metadata.metadata("seqdedup")
    _says_what_a_user_looks_for(metadata)
    assert metadata["Version"] == seqdedup.__version__
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]


def test_the_changelog_starts_with_this_version():
    first = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert first and first.group(1) == seqdedup.__version__


def test_the_wheel_ships_py_typed_the_license_and_the_metadata(tmp_path):
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in PACKAGE_FOLDERS:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-c", "from setuptools import build_meta; print(build_meta.build_wheel("
                            "'dist'))"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / "dist" / built.stdout.split()[-1]) as wheel:
        names = wheel.namelist()
        info = next(name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA"))
        metadata = importlib.metadata.PathDistribution(zipfile.Path(wheel, info + "/")).metadata
        assert "seqdedup/py.typed" in names
        assert "seqdedup/extensions/spark/log4j2.properties" in names     # given to the Spark drivers seqdedup starts
        assert "seqdedup/extensions/spark/jvm/Guard.java" in names       # the guards for Spark, compiled on first use
        assert f"{info}/licenses/LICENSE" in names
        _says_what_a_user_looks_for(metadata)
    missing = sorted(set(_modules()) - set(names))
    assert missing == [], f"the wheel leaves out {missing[:5]}: list their packages in pyproject.toml"


def _modules() -> list[str]:
    """Where each of the source tree's modules lands in the wheel: the folders as pyproject.toml maps them, the dbt
    adapter's entry under dbt/adapters/."""
    found = []
    for folder in PACKAGE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT / folder).as_posix()
            if folder != "seqdedup":
                found.append(f"seqdedup/{folder}/{relative}")
            elif relative.startswith("dbt/seqdedup_spark/"):
                found.append(f"dbt/adapters/seqdedup_spark/{relative.removeprefix('dbt/seqdedup_spark/')}")
            else:
                found.append(f"seqdedup/{relative}")
    return found


def test_the_modules_the_docs_reach_through_seqdedup_are_there():
    """``seqdedup.streaming.foreach_batch(...)`` (the README) and the other modules reachable as attributes, where
    the modules live under seqdedup/core/ and seqdedup/clients/."""
    assert seqdedup.streaming.foreach_batch is seqdedup.foreach_batch
    assert seqdedup.consumer.Reader is seqdedup.Reader and seqdedup.producer.Producer is seqdedup.Producer
    for name in ("kafka", "recovery"):
        assert inspect.ismodule(getattr(seqdedup, name)), name
    with pytest.raises(AttributeError, match="no attribute 'writer'"):
        seqdedup.writer


def test_the_public_api_says_what_it_returns():
    names = {"Session": Session, "Producer": Producer, "KafkaResult": KafkaResult}
    assert typing.get_type_hints(seqdedup.connect, localns=names)["return"] is Session
    assert typing.get_type_hints(Session.sql, localns=names)["return"] == StatementResult | QueryResult | Done | None
    assert typing.get_type_hints(Session.producer, localns=names)["return"] is Producer
    untyped = [name for name, method in inspect.getmembers(Session, inspect.isfunction)
               if not name.startswith("_") and "return" not in typing.get_type_hints(method, localns=names)]
    assert untyped == []
