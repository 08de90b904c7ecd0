"""Engine adapters: the only place that imports an engine. Each loads on first use, so ``import seqdedup``
works without pyspark (and Spark starts only when asked for)."""
from __future__ import annotations

import importlib

from seqdedup.errors import SeqdedupError

#: engine name -> (module, adapter class)
ENGINES = {"duckdb": ("seqdedup.extensions.duckdb", "DuckDBAdapter"),
           "spark": ("seqdedup.extensions.spark", "SparkAdapter")}


def create_adapter(engine: str, database=None, **options):
    try:
        module, name = ENGINES[engine.lower()]
    except KeyError:
        raise SeqdedupError(f"unknown engine {engine!r}; use one of: {', '.join(ENGINES)}") from None
    adapter_class = getattr(importlib.import_module(module), name)
    return adapter_class(*([database] if database is not None else []), **options)
