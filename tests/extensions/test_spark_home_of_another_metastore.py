"""Spark only: a warehouse whose tables another metastore registered (a copy of a home the drivers shared through a
PostgreSQL metastore, or a home whose metastore_db was deleted) holds seqdedup's files but no catalog this session
can see. ``connect`` says so, naming the option that reaches the shared metastore, where Spark would only say
``[TABLE_OR_VIEW_NOT_FOUND] default.producer_sequences``; and it registers nothing.

The test process's own session stands for the copy: a database of its own, its folder filled with another
database's catalog files, which its metastore never registered."""
from __future__ import annotations

import shutil
from urllib.parse import urlsplit

import pytest

from seqdedup.errors import CatalogError
from tests.engines import ENGINES, Harness

pytestmark = pytest.mark.spark

SPARK = next(engine for engine in ENGINES if engine.name == "spark")


def test_a_warehouse_registered_in_another_metastore_is_named_with_the_option_that_reaches_it(tmp_path_factory):
    original = Harness(SPARK, str(tmp_path_factory.getbasetemp() / "spark-home"))
    try:
        original.topic()
        original.send([("p", 1)])
        spark = original.session.adapter.spark

        def folder(database: str) -> str:
            return urlsplit(spark.catalog.getDatabase(database).locationUri).path

        copied = f"{original.namespace}_copied"
        spark.sql(f"CREATE DATABASE {copied}")
        shutil.copytree(folder(original.namespace), folder(copied), dirs_exist_ok=True)
        spark.sql(f"USE {copied}")
        with pytest.raises(CatalogError) as refused:
            original.connect()
        message = str(refused.value)
        assert f"{folder(copied)}/producer_sequences" in message, message
        assert "this session's metastore does not know it" in message
        assert "--metastore URL (or SEQDEDUP_METASTORE)" in message and "local_session(home, metastore=URL)" in message
        assert [t.name for t in spark.catalog.listTables(copied) if not t.isTemporary] == []     # nothing registered
    finally:
        original.session.close()
