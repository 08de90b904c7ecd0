"""The function set: what each function means, and the reference model of the Pulsar rules (the tests' oracle).

Imports nothing heavy: the standard library and ``seqdedup.errors`` only.
"""
from .key_window import WINDOW_REASONS, KeyWindow, WindowPolicy
from .reference import REASONS, DupStatus, Entry, LogEntry, Policies, SequenceTracker, Snapshot, StatementResult

__all__ = ["REASONS", "WINDOW_REASONS", "DupStatus", "Entry", "KeyWindow", "LogEntry", "Policies", "SequenceTracker",
           "Snapshot", "StatementResult", "WindowPolicy"]
