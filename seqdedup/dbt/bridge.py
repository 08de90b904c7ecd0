"""What both bridges share: a request from the dbt package served, with dbt's types for the answer.

A run's answer is a ``SeqdedupResponse``: dbt prints its message on the run's line (``INSERT 9 (duplicates 4,
commit 2)``) and writes every field to ``run_results.json`` under ``adapter_response``. A seqdedup error becomes a
``DbtRuntimeError`` with seqdedup's own message, so dbt reports it on the model like a database error. And every
statement dbt runs on its connections passes ``refuse_is_not_dup`` first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dbt.adapters.contracts.connection import AdapterResponse
from dbt_common.events.contextvars import get_node_info
from dbt_common.exceptions import DbtRuntimeError

from seqdedup.errors import SeqdedupError

from .model import Outcome, Target, calls_is_not_dup, plain_model_refusal


@dataclass
class SeqdedupResponse(AdapterResponse):
    """dbt's AdapterResponse of a topic model's run, with seqdedup's counts."""

    topic: Optional[str] = None       # the topic written, namespace.name
    written: int = 0                  # entries written
    duplicates: int = 0               # entries dropped as duplicates (R5: not an error)
    commit: Optional[int] = None      # the topic commit that holds the written entries (their _commit)
    producers: int = 0                # producers the run had entries of
    created: bool = False             # whether this run created the topic


def serve(target: Target, request: dict) -> object:
    """Serve one request of the dbt package on ``target`` (see ``Target.handle``), in dbt's terms."""
    try:
        value = target.handle(request)
    except SeqdedupError as error:
        raise DbtRuntimeError(str(error)) from error
    if isinstance(value, Outcome):
        return SeqdedupResponse(_message=value.message, code="INSERT", rows_affected=value.written,
                                topic=value.topic, written=value.written, duplicates=value.duplicates,
                                commit=value.commit, producers=value.producers, created=value.created)
    return value


def refuse_is_not_dup(sql: str, dialect) -> None:
    """Refuse a statement dbt is about to run that calls is_not_dup (a view, table or incremental model, a hook, an
    operation), before it runs: a view would be created and fail only when read. The bridges call it on every
    statement of dbt's connections; a topic model's own statement reaches seqdedup by another way."""
    function = calls_is_not_dup(sql, dialect)
    if function:
        raise DbtRuntimeError(plain_model_refusal(get_node_info(), function))
