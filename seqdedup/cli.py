"""The seqdedup command line: ``seqdedup init | topic | sql | ingest | state | snapshot | recover | stats | demo``.

Errors print as one line on stderr and exit 1; ``--json`` prints machine-readable output; ``--debug`` re-raises.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import sqlglot

from seqdedup import __version__
from seqdedup.catalog.policies import spelled
from seqdedup.compaction import FACTOR
from seqdedup.errors import SeqdedupError, SeqdedupWarning


def _session(args):
    import seqdedup

    if args.engine == "spark":
        from seqdedup.extensions.spark import local_session

        target = local_session(args.database, master=args.master, lock_timeout=args.lock_timeout)
    else:
        target = args.database
    return seqdedup.connect(target, engine=args.engine, dialect=getattr(args, "dialect", "spark"),
                            lock_timeout=args.lock_timeout)


def _emit(args, value, text: str | None = None) -> None:
    if args.json:
        print(json.dumps(value, default=str, indent=2))
    elif text is not None:
        print(text)


def _table(columns, rows) -> str:
    cells = [[str(c) for c in columns]] + [["NULL" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))] if columns else []
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    if lines:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _result_text(result) -> str:
    from seqdedup.results import Done, QueryResult, StatementResult

    if isinstance(result, StatementResult):
        lines = [f"{result.topic}: wrote {result.written}, dropped {result.duplicates} duplicates"
                 + (f" ({result.out_of_order} of them out of order)" if result.out_of_order else "")
                 + (f", snapshot {result.snapshot_id}" if result.snapshot_id else "")]
        lines += [f"  {p.producer}: wrote {p.written}, dropped {p.duplicates}"
                  + (f" ({p.out_of_order} out of order)" if p.out_of_order else "") for p in result.producers]
        return "\n".join(lines)
    if isinstance(result, QueryResult):
        return _table(result.columns, result.rows)
    if isinstance(result, Done):
        return result.message
    return "" if result is None else str(result)


def cmd_init(args) -> None:
    with _session(args) as s:
        _emit(args, {"database": args.database, "topics": s.topics()}, f"catalog ready in {args.database}")


def _policies(pairs: list[str] | None) -> dict[str, object]:
    policies = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SeqdedupError(f"policy {pair!r} must be written key=value (an empty value unsets it)")
        policies[key.strip()] = value.strip() or None
    return policies


def cmd_topic(args) -> None:
    if args.action == "list":
        return _topic_list(args)
    if not args.name:
        raise SeqdedupError(f"topic {args.action} needs the topic's name: seqdedup topic {args.action} NAME")
    if args.action == "drop":
        return _topic_drop(args)
    if args.action == "quarantine":
        return _topic_quarantine(args)
    with _session(args) as s:
        if args.action == "create":
            columns = {}
            for spec in args.column or []:
                name, sep, kind = spec.partition(":")
                if not sep:
                    raise SeqdedupError(f"column {spec!r} must be written name:TYPE, for example payload:STRING")
                columns[name] = kind
            s.create_topic(args.name, columns, **_policies(args.policy))
        elif args.action == "alter":
            s.alter_topic(args.name, **_policies(args.policy))
        topic = s.topic(args.name)
        info = {"topic": topic.ref.key, "columns": dict(topic.user_columns), "settings": topic.settings,
                "applied": vars(topic.applied)}
        text = [f"topic {topic.ref.key}", "columns: " + ", ".join(f"{n} {t}" for n, t in topic.user_columns),
                "policies (applied, and where set):"]
        for key, value in vars(topic.applied).items():
            origin = next((scope for scope in ("topic", "namespace", "global") if key in topic.settings[scope]), "default")
            text.append(f"  {key} = {spelled(key, value)}  ({origin})")
        _emit(args, info, "\n".join(text))


def _topic_list(args) -> None:
    with _session(args) as s:
        topics = [s.topic(key) for key in s.topics()]
    rows = [(t.ref.key, "enabled" if t.applied.deduplication_enabled else "disabled",
             ", ".join(f"{n} {k}" for n, k in t.user_columns)) for t in topics]
    _emit(args, [{"topic": key, "deduplication": dedup, "columns": dict(t.user_columns)}
                 for (key, dedup, _), t in zip(rows, topics)],
          _table(["topic", "deduplication", "columns"], rows) if rows else "no topics yet; create one with "
          "`seqdedup topic create NAME -c payload:STRING`")


def _topic_drop(args) -> None:
    if not args.yes:
        raise SeqdedupError(f"topic drop deletes topic {args.name} for good: its table with every entry, its state, "
                            f"policies and run log; add --yes to confirm: seqdedup topic drop {args.name} --yes")
    with _session(args) as s:
        dropped = s.drop_topic(args.name)
    entries = "no table" if dropped["entries"] is None else f"{dropped['entries']} entries"
    _emit(args, dropped, f"dropped topic {dropped['topic']} ({entries}, "
                         f"{sum(dropped['catalog_rows'].values())} catalog rows)")


def _topic_quarantine(args) -> None:
    with _session(args) as s:
        moved = s.quarantine_foreign_rows(args.name)
    rows, partitions = moved["rows"], moved["partitions"]
    text = f"{moved['topic']} holds no rows seqdedup did not write: nothing moved"
    if rows or partitions:
        dropped = f", and dropped its partitions {', '.join(f'_commit={p}' for p in partitions)}" if partitions else ""
        text = (f"moved {rows} row{'' if rows == 1 else 's'} seqdedup did not write from {moved['topic']} into "
                f"{moved['table']}{dropped}")
    _emit(args, moved, text)


def cmd_sql(args) -> None:
    text = Path(args.file).read_text() if args.file else args.statement
    if not text:
        raise SeqdedupError("give a statement, or --file with statements")
    with _session(args) as s:
        results = s.sql_all(text, dialect=args.dialect)
        _emit(args, [r.to_dict() for r in results], "\n".join(_result_text(r) for r in results))


def cmd_ingest(args) -> None:
    from seqdedup.ingest import ingest

    if args.one_commit and args.batch_rows is not None:
        raise SeqdedupError("--one-commit writes the whole input as one statement; leave out --batch-rows")
    with contextlib.ExitStack() as stack:
        paths = [_stdin(stack, args.format) if path == "-" else path for path in args.path]
        s = stack.enter_context(_session(args))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeqdedupWarning)    # said below, once, in the result's own words
            result = ingest(s, args.topic, paths, producer=args.producer_column, sequence_id=args.sequence_column,
                            highest_sequence_id=args.highest_column, order_by=args.order_by, fmt=args.format,
                            batch_rows=args.batch_rows or 1_000_000, one_commit=args.one_commit,
                            progress=not args.json and not args.no_progress)
        late = f" ({result['out_of_order']} of them out of order)" if result["out_of_order"] else ""
        _emit(args, result, f"{args.topic}: wrote {result['written']}, dropped {result['duplicates']} duplicates"
                            f"{late} in {result['statements']} statement(s)")
        if "warning" in result and not args.json:
            print(f"warning: {result['warning']}", file=sys.stderr)


def _stdin(stack: contextlib.ExitStack, fmt: str | None) -> str:
    """Standard input, saved to a temporary file the engines can read (JSON lines unless --format says otherwise)."""
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="seqdedup-stdin-"))
    path = Path(folder) / f"stdin.{fmt or 'json'}"
    with open(path, "wb") as file:
        shutil.copyfileobj(sys.stdin.buffer, file)
    return str(path)


def cmd_state(args) -> None:
    with _session(args) as s:
        state = s.producer_state(args.topic)
        _emit(args, state.to_dict(), _table(state.columns, state.rows))


def cmd_snapshot(args) -> None:
    with _session(args) as s:
        snapshot_id = s.snapshot(args.topic)
        _emit(args, {"snapshot_id": snapshot_id},
              f"snapshot {snapshot_id} taken" if snapshot_id else "nothing new since the last snapshot")


def cmd_recover(args) -> None:
    from seqdedup.recovery import recover, spelled_mark

    with _session(args) as s:
        report = recover(s, args.topic, repair=args.repair)
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
    _emit(args, report.to_dict(), "\n".join(lines))
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
    with _session(args) as s:
        stats = s.stats(args.topic)
        lines = [f"{k}: {v}" for k, v in stats.items() if k not in ("producers", "foreign")]
        lines += [f"  {p}: wrote {c['written']}, dropped {c['duplicates']}" for p, c in stats["producers"].items()]
        lines += [stats["foreign"]] if "foreign" in stats else []
        _emit(args, stats, "\n".join(lines))


def cmd_compact(args) -> None:
    with _session(args) as s:
        done = s.compact(args.topic, factor=args.factor)
    merged = ", ".join(f"{first}-{last}" for first, last in done.merged)
    text = (f"{done.topic}: {done.partitions_before} partitions, now {done.partitions_after}"
            + (f"; merged commits {merged} ({done.rows} rows rewritten)" if done.merged else "; nothing to merge")
            + (f"; dropped {done.repaired} partitions an interrupted compaction had merged" if done.repaired else ""))
    _emit(args, dataclasses.asdict(done), text)


def cmd_demo(args) -> None:
    from seqdedup.demo import run_demo

    report = run_demo(lambda: _session(args), producers=args.producers, messages=args.messages, seed=args.seed,
                      progress=not args.json, where=f"{args.database}, {args.engine}")
    _emit(args, report, report["text"])
    if not report["ok"]:
        raise SystemExit(1)


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--database", "-d", default=None,
                        help="DuckDB: the database file (default seqdedup.duckdb in the working folder; "
                             "seqdedup-demo.duckdb for the demo). Spark: the folder of the local session's "
                             "warehouse and Hive metastore (default seqdedup-spark)")
    common.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"],
                        help="engine: duckdb (default, embedded) or spark (PySpark)")
    common.add_argument("--master", default="local[2]", help="Spark master URL (with --engine spark)")
    common.add_argument("--lock-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long to wait for another writer of the database (default 60)")
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument("--debug", action="store_true", help="show the full traceback on errors")

    top = argparse.ArgumentParser(prog="seqdedup", description="Effectively-once ingestion for tables, as SQL.")
    top.add_argument("--version", action="version", version=f"seqdedup {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("init", parents=[common], help="create the catalog").set_defaults(func=cmd_init)

    topic = sub.add_parser("topic", parents=[common], help="list topics; create, alter, show or drop one; quarantine "
                                                           "its rows seqdedup did not write")
    topic.add_argument("action", choices=["list", "create", "alter", "show", "drop", "quarantine"])
    topic.add_argument("name", nargs="?")
    topic.add_argument("--yes", action="store_true",
                       help="with drop: confirm that the topic, its entries and its state are deleted for good")
    topic.add_argument("--column", "-c", action="append", help="name:TYPE (Spark SQL type), repeatable")
    topic.add_argument("--policy", "-p", action="append",
                       help="policy=value, repeatable; an empty value unsets (deduplication_enabled, "
                            "snapshot_interval_entries, snapshot_interval_seconds, producer_inactivity_timeout, "
                            "max_producers_in_snapshot)")
    topic.set_defaults(func=cmd_topic)

    sql = sub.add_parser("sql", parents=[common], help="run SQL statements (Spark SQL by default)")
    sql.add_argument("statement", nargs="?")
    sql.add_argument("--file", "-f")
    sql.add_argument("--dialect", default="spark", choices=["spark", "duckdb"])
    sql.set_defaults(func=cmd_sql)

    ingest = sub.add_parser("ingest", parents=[common], help="ingest JSON lines, CSV or Parquet into a topic")
    ingest.add_argument("topic")
    ingest.add_argument("path", nargs="+", help="files, globs (quoted: 'data/*.jsonl'), or - for standard input "
                                                "(JSON lines unless --format says otherwise)")
    ingest.add_argument("--producer-column", required=True)
    ingest.add_argument("--sequence-column", required=True)
    ingest.add_argument("--highest-column")
    ingest.add_argument("--order-by", help="arrival order column (default: producer, sequence id)")
    ingest.add_argument("--format", choices=["json", "csv", "parquet"], help="default: from the file name")
    ingest.add_argument("--batch-rows", type=int, help="rows per statement (default 1,000,000)")
    ingest.add_argument("--one-commit", action="store_true",
                        help="the whole input as one statement: all of it is written, or nothing")
    ingest.add_argument("--no-progress", action="store_true")
    ingest.set_defaults(func=cmd_ingest)

    for name, func, text in (("state", cmd_state, "show the recovered producer marks of a topic"),
                             ("snapshot", cmd_snapshot, "take a snapshot now (and purge idle producers)"),
                             ("recover", cmd_recover, "rebuild a topic's state and check it against the log"),
                             ("stats", cmd_stats, "what a topic holds and what was dropped")):
        command = sub.add_parser(name, parents=[common], help=text)
        command.add_argument("topic")
        command.set_defaults(func=func)
        if name == "recover":
            command.add_argument("--repair", action="store_true",
                                 help="when the state differs from a replay of the log, write the replayed marks")

    compact = sub.add_parser("compact", parents=[common], help="merge a topic's commits into fewer partitions "
                                                               "(Spark: one per commit until compacted)")
    compact.add_argument("topic")
    compact.add_argument("--factor", type=int, default=FACTOR,
                         help=f"partitions of one tier merged into one of the next (default {FACTOR})")
    compact.set_defaults(func=cmd_compact)

    demo = sub.add_parser("demo", parents=[common], help="producers that retry, crash and restart; each message lands once")
    demo.add_argument("--producers", type=int, default=4)
    demo.add_argument("--messages", type=int, default=1000, help="messages per producer")
    demo.add_argument("--seed", type=int, default=7)
    demo.set_defaults(func=cmd_demo)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.database is None:
        if args.engine == "spark":
            args.database = "seqdedup-spark"
        else:
            args.database = "seqdedup-demo.duckdb" if args.func is cmd_demo else "seqdedup.duckdb"
    try:
        args.func(args)
    except BrokenPipeError:          # the reader went away (| head): not an error of ours
        sys.stderr.close()
        return 0
    except (SeqdedupError, sqlglot.errors.SqlglotError, OSError, RecursionError) as error:
        if args.debug:
            raise
        if isinstance(error, RecursionError):     # a tree too deep somewhere past the parser's check
            error = SeqdedupError("the input nests too deeply for seqdedup to read; write it flatter")
        print(f"seqdedup: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
