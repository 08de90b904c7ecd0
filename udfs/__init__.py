"""The function set: what each function means, and the reference model of the Pulsar rules (the tests' oracle).
Imports nothing heavy."""
from .reference import DupStatus, Entry, LogEntry, Policies, Snapshot, SequenceTracker, StatementResult

__all__ = ["DupStatus", "Entry", "LogEntry", "Policies", "Snapshot", "SequenceTracker", "StatementResult"]
