"""Changing policies (R9, R10): settings recorded at a scope (a topic, a namespace, global), and the states of the
topics they apply to following them, each in a commit of its own.

Turning deduplication off forgets a topic's marks (R10): ``forgotten_by`` says ahead of a change which topics that
would be and how many marks each holds (``seqdedup topic alter`` asks for --yes then), and ``set_policies`` warns
once, after the change, where it did.
"""
from __future__ import annotations

import warnings
from dataclasses import replace

from seqdedup.catalog import policies as policy
from seqdedup.catalog.catalog import TopicRef
from seqdedup.errors import PolicyError, SeqdedupWarning

from ..failpoints import failpoint
from .broker import Broker
from .snapshots import follow_policies
from .topic_state import TopicState

#: The policy whose turning off forgets a topic's marks (R10).
ENABLED = "deduplication_enabled"


def applies(scope: str, target: str, ref: TopicRef) -> bool:
    """Whether a policy set at ``scope`` on ``target`` (a topic's namespace.name, a namespace, "" for global) is
    one of topic ``ref``'s (R9)."""
    return scope == "global" or (scope == "namespace" and ref.namespace == target) or \
        (scope == "topic" and ref.key == target)


def forgetting(forgotten: dict[str, int]) -> str:
    """The topics of ``Session.would_forget`` and what each would forget, in words.

    Example:
        >>> forgetting({"main.events": 3, "main.other": 0})
        "main.events (3 producers' marks), main.other (no marks yet)"
    """
    def said(count: int) -> str:
        return "no marks yet" if not count else "1 producer's mark" if count == 1 else f"{count} producers' marks"

    return ", ".join(f"{key} ({said(count)})" for key, count in forgotten.items())


def forgotten_by(broker: Broker, scope: str, target: str, policies: dict[str, object]) -> dict[str, int]:
    """``Session.would_forget`` for settings at ``scope`` on ``target``: topics whose deduplication is on now and
    would be off, each with its number of producers with a mark."""
    values = dict(policy.normalize(key, value) for key, value in policies.items())
    if ENABLED not in values:
        return {}
    forgotten = {}
    with broker.writer:
        for ref in broker.reads().topics():
            if not applies(scope, target, ref):
                continue
            try:
                state = broker.state(ref)
                if not state.enabled:
                    continue
                # deduplication_enabled as set at each scope once these are set (another policy's unreadable
                # row is not this change's to report)
                settings = {at: {k: v for k, v in values_at.items() if k == ENABLED}
                            for at, values_at in broker.topic(ref).settings.items()}
                settings[scope] = {} if values[ENABLED] is None else {ENABLED: values[ENABLED]}
                if not policy.resolve(settings).deduplication_enabled:
                    forgotten[ref.key] = state.marks.num_rows
            except PolicyError:      # the topic's policies cannot be read: its statements say so
                continue
    return forgotten


def set_policies(broker: Broker, scope: str, target: str, policies: dict[str, object]) -> None:
    """Record the settings, then, in a commit of each topic they apply to, make its state follow (R10); warn
    once where that turned deduplication off on topics, forgetting their marks (to the caller of the
    ``Session`` method that called this)."""
    writer, catalog = broker.writer, broker.catalog
    with writer:
        forgotten = forgotten_by(broker, scope, target, policies)
        now = broker.clock()
        kept: dict[TopicRef, TopicState] = {}
        try:
            with broker.adapter.transaction():
                catalog.set_policies(scope, target, policies, now)
                failpoint("after_policy_rows")
                for ref in catalog.topics():
                    if applies(scope, target, ref):
                        state = replace(writer.state(ref), topic=catalog.topic(ref))
                        with writer.commit(ref, state.commit + 1) as commit:
                            state = follow_policies(broker, state, commit, now, purge=False)
                        kept[ref] = state.after(commit=commit.number)
        except BaseException:
            writer.forget()
            raise
        for ref, state in kept.items():
            writer.keep(ref, state)
    if forgotten:
        warnings.warn(SeqdedupWarning(
            f"deduplication is off now on {forgetting(forgotten)}: those marks are forgotten (R10). While it is "
            "off no entry is checked, and once it is on again every id sent before is accepted again, so a retry "
            "is written twice (docs/semantics.md, R10)"), stacklevel=3)


__all__ = ["ENABLED", "applies", "forgetting", "forgotten_by", "set_policies"]
