"""dbt's entry to the ``seqdedup_spark`` adapter, installed as ``dbt.adapters.seqdedup_spark`` (dbt finds adapters
there by their type); the adapter itself is ``seqdedup.dbt.spark``."""
from pathlib import Path

from dbt.adapters.base import AdapterPlugin

from seqdedup.dbt.spark import Seqdedup_SparkAdapter, SeqdedupSparkCredentials

Plugin = AdapterPlugin(
    adapter=Seqdedup_SparkAdapter,
    credentials=SeqdedupSparkCredentials,
    include_path=str(Path(__file__).parent / "include"),
    dependencies=["spark"],      # dbt-spark's macros and materializations, found before dbt's defaults
)
