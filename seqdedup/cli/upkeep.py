"""The commands that look after a topic: ``state``, ``snapshot``, ``recover`` (its state against its log), ``stats``
and ``compact``."""
from __future__ import annotations

import dataclasses

from seqdedup.core.results import text_table
from seqdedup.errors import SeqdedupError

from .output import counted, emit
from .target import open_session


def cmd_state(args) -> None:
    with open_session(args) as s:
        state = s.producer_state(args.topic)
        emit(args, state.to_dict(), text_table(state.columns, state.rows))


def cmd_snapshot(args) -> None:
    with open_session(args) as s:
        snapshot_id = s.snapshot(args.topic)
        emit(args, {"snapshot_id": snapshot_id},
              f"snapshot {snapshot_id} taken" if snapshot_id else "nothing new since the last snapshot")


def cmd_recover(args) -> None:
    from seqdedup.core.recovery import recover, spelled_mark

    with open_session(args) as s:
        report = recover(s.broker, args.topic, repair=args.repair)
    checked = report.checked_from
    if report.missing_state:
        lines = [f"{report.topic}: no complete snapshot, so no state to recover; {report.replayed} entries in the log, "
                 f"as of position {report.last_position}"]
    else:
        lines = [f"{report.topic}: {report.producers} producers recovered from snapshot {report.snapshot_id} and "
                 f"{report.replayed} replayed entries, as of position {report.last_position}"]
    if checked is None:
        lines.append("deduplication is disabled: there is no state to check")
    elif not report.missing_state:
        start = "the whole log" if checked["snapshot_id"] is None else \
            f"the log from snapshot {checked['snapshot_id']} ({checked['kind']}, position {checked['position']})"
        lines.append(f"checked against a replay of {start}: "
                     + ("matches" if report.matches_full_replay else "DIFFERS"))
    if report.start_refused:
        lines.append(report.start_refused)
    lines += [f"  snapshot {checked['snapshot_id']} holds {d['producer']} at {spelled_mark(d['snapshot'])}, the log "
              f"gives {spelled_mark(d['log'])}" for d in report.start_differences]
    lines += [f"  {d['producer']}: state {d['state']}, log {d['log']}" for d in report.differences]
    if report.left_out_by_cap:
        lines.append(f"left out of the state by max_producers_in_snapshot (R12): {', '.join(report.left_out_by_cap)}")
    if report.repaired_snapshot_id is not None:
        lines.append(f"rebuilt: snapshot {report.repaired_snapshot_id} holds the marks of a replay of the whole log"
                     if report.missing_state else
                     f"repaired: snapshot {report.repaired_snapshot_id} holds the replayed marks")
    if report.new_snapshot_id is not None:
        lines.append(f"took snapshot {report.new_snapshot_id} at the log's end")
    if report.foreign:
        lines.append(report.foreign)
    emit(args, report.to_dict(), "\n".join(lines))
    if report.ok:
        return
    fix = []
    if report.missing_state and report.repaired_snapshot_id is None:
        fix.append(f"nothing was written; run `seqdedup recover {args.topic} --repair` to rebuild the state from a "
                   "replay of the whole log (ids a purge or a disable let in again are duplicates again), or restore "
                   "producer_sequences from a backup of this database")
    elif report.differences and report.repaired_snapshot_id is None:
        fix.append(f"nothing was written; run `seqdedup recover {args.topic} --repair` to replace the state with the "
                   "replayed marks")
    if report.duplicates_found:
        fix.append("seqdedup never deletes topic rows: remove the extra rows by hand (keep one row per position), "
                   "then run recover again")
    raise SeqdedupError(f"{report.topic}: {report.problems()}; {'; '.join(fix)}")


def cmd_stats(args) -> None:
    from seqdedup.core.results import ProducerCount

    with open_session(args) as s:
        stats = s.stats(args.topic)
    counts = {name: ProducerCount(producer=name, written=c["written"], duplicates=c["duplicates"],
                                  first_position=None, last_position=None, out_of_order=c["out_of_order"])
              for name, c in stats["producers"].items()}
    for name, count in counts.items():              # (the duplicates that repeat an id, as by_producer() has them)
        stats["producers"][name]["repeats"] = count.repeats
    stats["repeats"] = sum(count.repeats for count in counts.values())
    snapshot, catalog = stats["last_snapshot"], stats["catalog"]
    facts = [
        ("topic", stats["topic"]),
        ("deduplication", "enabled" if stats["deduplication_enabled"] else "disabled"),
        ("entries", f"{stats['entries']} (last position {stats['last_position']})"),
        ("last snapshot", f"{snapshot['snapshot_id']} ({snapshot['kind']}) at position {snapshot['position']}, taken "
                          f"{snapshot['taken_at'][:19].replace('T', ' ')}; "
                          f"{counted(stats['entries_since_snapshot'], 'entry', 'entries')} since"),
        ("catalog", f"{counted(catalog['snapshot_rows'], 'snapshot row')} in "
                    f"{counted(catalog['snapshots'], 'snapshot')}, "
                    f"{counted(catalog['run_log_rows'], 'run log row')}; recovery reads snapshot"
                    f"{'s' if len(catalog['chain']) != 1 else ''} {', '.join(map(str, catalog['chain'])) or 'none'}; "
                    f"{counted(catalog['changed_since_snapshot'], 'producer')} changed since"),
        ("written", stats["written"]),
        ("duplicates", f"{stats['duplicates']} ({counted(stats['repeats'], 'repeat')}, {stats['out_of_order']} out "
                       "of order)"),
        ("foreign rows", f"{stats['foreign_rows']} (rows seqdedup did not write: left out)"),
    ]
    width = max(len(label) for label, _ in facts) + 1
    lines = [f"{label + ':':<{width}} {value}" for label, value in facts]
    if counts:
        rows = [(c.producer, c.written, c.duplicates, c.repeats, c.out_of_order) for c in counts.values()]
        lines += ["", text_table(["producer", "written", "duplicates", "repeats", "out_of_order"], rows)]
    lines += [stats["foreign"]] if "foreign" in stats else []
    emit(args, stats, "\n".join(lines))


def cmd_compact(args) -> None:
    with open_session(args) as s:
        done = s.compact(args.topic, factor=args.factor)
    merged = ", ".join(f"{first}-{last}" for first, last in done.merged)
    text = (f"{done.topic}: {done.partitions_before} partitions, now {done.partitions_after}"
            + (f"; merged commits {merged} ({done.rows} rows rewritten)" if done.merged else "; nothing to merge")
            + (f"; dropped {done.repaired} partitions an interrupted compaction had merged" if done.repaired else ""))
    emit(args, dataclasses.asdict(done), text)
