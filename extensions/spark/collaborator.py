"""The base of the Spark adapter's collaborators: each does one job of the adapter (its scratch tables, its tables'
files, a topic's partitions, the commit protocol, compaction, the quarantine of foreign rows) through the adapter's
public methods, and keeps the state of that job."""
from __future__ import annotations


class Collaborator:
    def __init__(self, adapter):
        self.adapter = adapter
        self.spark = adapter.spark      # (the adapter's SparkSession and its kind's functions, used at every step)
        self.F = adapter.F
