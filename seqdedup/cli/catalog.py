"""The commands that shape the catalog: ``init``, ``topic`` (list, create, alter, show, drop, quarantine), and
``namespace`` and ``global`` (the policies a topic takes when it sets none of its own)."""
from __future__ import annotations

import shlex
import warnings

from seqdedup.catalog.policies import spelled
from seqdedup.core.results import text_table
from seqdedup.errors import SeqdedupError, SeqdedupWarning

from .output import emit
from .target import open_session


def cmd_init(args) -> None:
    with open_session(args) as s:
        emit(args, {"database": args.database, "topics": s.topics()}, f"catalog ready in {args.database}")


def _policies(pairs: list[str] | None) -> dict[str, object]:
    policies = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SeqdedupError(f"policy {pair!r} must be written key=value (an empty value unsets it)")
        policies[key.strip()] = value.strip() or None
    return policies


def _applied(topic, keys=None) -> dict[str, dict[str, str]]:
    """Each policy of ``topic`` (those of ``keys``, else all) as it applies: its value and the scope that set it."""
    return {key: {"value": spelled(key, value),
                  "set_at": next((at for at in ("topic", "namespace", "global") if key in topic.settings[at]),
                                 "default")}
            for key, value in vars(topic.applied).items() if keys is None or key in keys}


def _set_policies(args, session, policies: dict[str, object], setter, **where) -> dict[str, int]:
    """Set ``policies`` with ``setter()``; a change that turns deduplication off on a topic (R10: its marks are
    forgotten) is refused without --yes, naming what it would forget. Returns what was forgotten (topic ->
    producers)."""
    from seqdedup.core.policy_changes import forgetting

    forgotten = session.would_forget(policies, **where)
    if forgotten and not args.yes:
        raise SeqdedupError(f"this turns deduplication off on {forgetting(forgotten)}, and forgets those marks "
                            "(R10): once it is on again, every id sent before is accepted again and a retry is written "
                            f"twice. Nothing was changed; add --yes to confirm: {shlex.join(['seqdedup', *args.argv])} "
                            "--yes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqdedupWarning)    # said in the command's own words
        setter()
    return forgotten


def _forgot(forgotten: dict[str, int]) -> list[str]:
    from seqdedup.core.policy_changes import forgetting

    if not forgotten:
        return []
    return [f"deduplication is off now on {forgetting(forgotten)}: those marks are forgotten (R10)"]


def cmd_topic(args) -> None:
    if args.action == "list":
        return _topic_list(args)
    if not args.name:
        raise SeqdedupError(f"topic {args.action} needs the topic's name: seqdedup topic {args.action} NAME")
    if args.action == "drop":
        return _topic_drop(args)
    if args.action == "quarantine":
        return _topic_quarantine(args)
    forgotten = {}
    with open_session(args) as s:
        if args.action == "create":
            columns = {}
            for spec in args.column or []:
                name, sep, kind = spec.partition(":")
                if not sep:
                    raise SeqdedupError(f"column {spec!r} must be written name:TYPE, for example payload:STRING")
                columns[name] = kind
            # (the topic as created, columns and policies: on Spark a lookup costs a job)
            topic = s.create_topic(args.name, columns, id_parts=args.id_parts, **_policies(args.policy))
        else:
            if args.action == "alter":
                policies = _policies(args.policy)
                forgotten = _set_policies(args, s, policies, lambda: s.alter_topic(args.name, **policies),
                                          topic=args.name)
            topic = s.topic(args.name)
    applied = _applied(topic)
    info = {"topic": topic.ref.key, "columns": dict(topic.user_columns), "id_parts": topic.id_parts,
            "settings": topic.settings,
            "applied": vars(topic.applied), **({"forgotten": forgotten} if forgotten else {})}
    text = [*_forgot(forgotten), f"topic {topic.ref.key}",
            "columns: " + ", ".join(f"{n} {t}" for n, t in topic.user_columns),
            *([f"ids: composite, {topic.id_parts} parts (R19)"] if topic.id_parts else []),
            "policies (applied, and where set):"]
    text += [f"  {key} = {a['value']}  ({a['set_at']})" for key, a in applied.items()]
    emit(args, info, "\n".join(text))


def cmd_namespace(args) -> None:
    """``namespace alter NS -p k=v``: the namespace's policies, for its topics that set none of their own."""
    policies = _policies(args.policy)
    with open_session(args) as s:
        forgotten = _set_policies(args, s, policies, lambda: s.set_namespace_policy(args.name, **policies),
                                  namespace=args.name)
        topics = [s.topic(key) for key in s.topics()]
    _policies_set(args, ("namespace", args.name), policies, forgotten,
                  [t for t in topics if t.ref.namespace == args.name])


def cmd_global(args) -> None:
    """``global alter -p k=v``: the global policies, for every topic whose topic and namespace set none."""
    policies = _policies(args.policy)
    with open_session(args) as s:
        forgotten = _set_policies(args, s, policies, lambda: s.set_global_policy(**policies))
        topics = [s.topic(key) for key in s.topics()]
    _policies_set(args, ("global", ""), policies, forgotten, topics)


def _policies_set(args, where: tuple[str, str], policies: dict[str, object], forgotten: dict[str, int],
                  topics) -> None:
    """What a namespace or global policy change (``where``: scope, target) set, and how each policy it set now
    applies to the topics in its scope."""
    from seqdedup.catalog.policies import normalize

    scope, target = where
    values = dict(normalize(key, value) for key, value in policies.items())
    lines = [*_forgot(forgotten),
             f"{' '.join(filter(None, where))}: " + ", ".join(f"unset {key}" if value is None else f"{key} = {value}"
                                                             for key, value in values.items())]
    applied = {t.ref.key: _applied(t, values) for t in topics}
    lines += [f"  {key}: " + ", ".join(f"{k} = {a['value']} ({a['set_at']})" for k, a in policies_of.items())
              for key, policies_of in applied.items()]
    lines += [] if topics else ["  (no topic here yet: it applies to those created later)"]
    emit(args, {"scope": scope, "target": target, "set": values, "topics": applied,
                 **({"forgotten": forgotten} if forgotten else {})},
          "\n".join(lines))


def _topic_list(args) -> None:
    with open_session(args) as s:
        topics = [s.topic(key) for key in s.topics()]
    rows = [(t.ref.key, "enabled" if t.applied.deduplication_enabled else "disabled",
             ", ".join(f"{n} {k}" for n, k in t.user_columns)) for t in topics]
    emit(args, [{"topic": key, "deduplication": dedup, "columns": dict(t.user_columns)}
                 for (key, dedup, _), t in zip(rows, topics)],
          text_table(["topic", "deduplication", "columns"], rows) if rows else "no topics yet; create one with "
          "`seqdedup topic create NAME -c payload:STRING`")


def _topic_drop(args) -> None:
    if not args.yes:
        raise SeqdedupError(f"topic drop deletes topic {args.name} for good: its table with every entry, its state, "
                            f"policies and run log; add --yes to confirm: seqdedup topic drop {args.name} --yes")
    with open_session(args) as s:
        dropped = s.drop_topic(args.name)
    entries = "no table" if dropped["entries"] is None else f"{dropped['entries']} entries"
    emit(args, dropped, f"dropped topic {dropped['topic']} ({entries}, "
                         f"{sum(dropped['catalog_rows'].values())} catalog rows)")


def _topic_quarantine(args) -> None:
    with open_session(args) as s:
        moved = s.quarantine_foreign_rows(args.name)
    rows, partitions = moved["rows"], moved["partitions"]
    text = f"{moved['topic']} holds no rows seqdedup did not write: nothing moved"
    if rows or partitions:
        dropped = f", and dropped its partitions {', '.join(f'_commit={p}' for p in partitions)}" if partitions else ""
        text = (f"moved {rows} row{'' if rows == 1 else 's'} seqdedup did not write from {moved['topic']} into "
                f"{moved['table']}{dropped}")
    emit(args, moved, text)
