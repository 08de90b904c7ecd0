"""The seqdedup command line: ``seqdedup init | topic | namespace | global | sql | ingest | state | snapshot | recover |
stats | compact | demo | connect-server``.

Errors print as one line on stderr and exit 1; ``--json`` prints machine-readable output; ``--debug`` re-raises. With
``--remote sc://HOST:PORT`` (or SEQDEDUP_REMOTE) every command runs on a running Spark Connect server, with no JVM of
its own (``seqdedup connect-server`` starts one with seqdedup's settings).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import sqlglot

from seqdedup import __version__
from seqdedup.catalog.policies import DEFINITIONS, spelled
from seqdedup.core.compaction import FACTOR
from seqdedup.errors import SeqdedupError, SeqdedupWarning
from seqdedup.core.results import text_table
from seqdedup.udfs import Policies

#: The environment variable that stands for ``--remote`` (a command line's --engine duckdb or --remote wins over it).
REMOTE_VARIABLE = "SEQDEDUP_REMOTE"
#: The environment variable that stands for ``--metastore`` (a command line's --engine duckdb or --remote wins over it).
METASTORE_VARIABLE = "SEQDEDUP_METASTORE"
#: Where ``seqdedup connect-server`` listens unless told otherwise: Spark Connect's own default port.
SERVER_PORT = 15002


def _session(args):
    import seqdedup

    if args.remote:
        if args.spark is None:          # one Connect session per command, released by main()
            from seqdedup.extensions.spark.connect_server import remote_session

            args.spark = remote_session(args.remote)
        target = args.spark
    elif args.engine == "spark":
        from seqdedup.extensions.spark import local_session

        target = local_session(args.database, master=args.master, lock_timeout=args.lock_timeout,
                               metastore=args.metastore)
    else:
        target = args.database
    return seqdedup.connect(target, engine=args.engine, dialect=getattr(args, "dialect", "spark"),
                            lock_timeout=args.lock_timeout)


def _emit(args, value, text: str | None = None) -> None:
    if args.json:
        print(json.dumps(value, default=str, indent=2))
    elif text is not None:
        print(text)


def _result_text(result) -> str:
    from seqdedup.core.results import Done, QueryResult, StatementResult

    if isinstance(result, StatementResult):
        lines = [f"{result.topic}: wrote {result.written}, dropped {result.duplicates} duplicates"
                 + (f" ({result.out_of_order} of them out of order)" if result.out_of_order else "")
                 + (f", snapshot {result.snapshot_id}" if result.snapshot_id else "")]
        lines += [f"  {p.producer}: wrote {p.written}, dropped {p.duplicates}"
                  + (f" ({p.out_of_order} out of order)" if p.out_of_order else "") for p in result.producers]
        return "\n".join(lines)
    if isinstance(result, QueryResult):
        return text_table(result.columns, result.rows)
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


def _applied(topic, keys=None) -> dict[str, dict[str, str]]:
    """Each policy of ``topic`` (those of ``keys``, else all) as it applies: its value and the scope that set it."""
    return {key: {"value": spelled(key, value),
                  "set_at": next((at for at in ("topic", "namespace", "global") if key in topic.settings[at]),
                                 "default")}
            for key, value in vars(topic.applied).items() if keys is None or key in keys}


def _set_policies(args, session, policies: dict[str, object], setter, **where) -> dict[str, int]:
    """Set ``policies`` with ``setter()``; a change that turns deduplication off on a topic (R10: its marks are
    forgotten) is refused without --yes, naming what it would forget. Returns what was forgotten (topic -> producers)."""
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

    return [f"deduplication is off now on {forgetting(forgotten)}: those marks are forgotten (R10)"] if forgotten else []


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
    with _session(args) as s:
        if args.action == "create":
            columns = {}
            for spec in args.column or []:
                name, sep, kind = spec.partition(":")
                if not sep:
                    raise SeqdedupError(f"column {spec!r} must be written name:TYPE, for example payload:STRING")
                columns[name] = kind
            # (the topic as created, columns and policies: on Spark a lookup costs a job)
            topic = s.create_topic(args.name, columns, **_policies(args.policy))
        else:
            if args.action == "alter":
                policies = _policies(args.policy)
                forgotten = _set_policies(args, s, policies, lambda: s.alter_topic(args.name, **policies),
                                          topic=args.name)
            topic = s.topic(args.name)
    applied = _applied(topic)
    info = {"topic": topic.ref.key, "columns": dict(topic.user_columns), "settings": topic.settings,
            "applied": vars(topic.applied), **({"forgotten": forgotten} if forgotten else {})}
    text = [*_forgot(forgotten), f"topic {topic.ref.key}",
            "columns: " + ", ".join(f"{n} {t}" for n, t in topic.user_columns), "policies (applied, and where set):"]
    text += [f"  {key} = {a['value']}  ({a['set_at']})" for key, a in applied.items()]
    _emit(args, info, "\n".join(text))


def cmd_namespace(args) -> None:
    """``namespace alter NS -p k=v``: the namespace's policies, for its topics that set none of their own."""
    policies = _policies(args.policy)
    with _session(args) as s:
        forgotten = _set_policies(args, s, policies, lambda: s.set_namespace_policy(args.name, **policies),
                                  namespace=args.name)
        topics = [s.topic(key) for key in s.topics()]
    _policies_set(args, ("namespace", args.name), policies, forgotten,
                  [t for t in topics if t.ref.namespace == args.name])


def cmd_global(args) -> None:
    """``global alter -p k=v``: the global policies, for every topic whose topic and namespace set none."""
    policies = _policies(args.policy)
    with _session(args) as s:
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
    _emit(args, {"scope": scope, "target": target, "set": values, "topics": applied,
                 **({"forgotten": forgotten} if forgotten else {})},
          "\n".join(lines))


def _topic_list(args) -> None:
    with _session(args) as s:
        topics = [s.topic(key) for key in s.topics()]
    rows = [(t.ref.key, "enabled" if t.applied.deduplication_enabled else "disabled",
             ", ".join(f"{n} {k}" for n, k in t.user_columns)) for t in topics]
    _emit(args, [{"topic": key, "deduplication": dedup, "columns": dict(t.user_columns)}
                 for (key, dedup, _), t in zip(rows, topics)],
          text_table(["topic", "deduplication", "columns"], rows) if rows else "no topics yet; create one with "
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
        shown = [r.to_dict() for r in results]
        # one statement: its object; several: a list of them, in order (as Session.sql and Session.sql_all return)
        _emit(args, shown[0] if len(shown) == 1 else shown, "\n".join(_result_text(r) for r in results))


def cmd_ingest(args) -> None:
    from seqdedup.clients.ingest import ingest

    if args.one_commit and args.batch_rows is not None:
        raise SeqdedupError("--one-commit writes the whole input as one statement; leave out --batch-rows")
    with contextlib.ExitStack() as stack:
        paths = [_stdin(stack, args.format) if path == "-" else path for path in args.path]
        if args.remote:         # the server reads the files: relative to its own folder, they would be other files
            paths = [os.path.abspath(path) for path in paths]
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
        _emit(args, state.to_dict(), text_table(state.columns, state.rows))


def cmd_snapshot(args) -> None:
    with _session(args) as s:
        snapshot_id = s.snapshot(args.topic)
        _emit(args, {"snapshot_id": snapshot_id},
              f"snapshot {snapshot_id} taken" if snapshot_id else "nothing new since the last snapshot")


def cmd_recover(args) -> None:
    from seqdedup.core.recovery import recover, spelled_mark

    with _session(args) as s:
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


def _count(number: int, word: str, words: str | None = None) -> str:
    """``3 snapshot rows``, ``1 snapshot row``."""
    return f"{number} {word if number == 1 else words or word + 's'}"


def cmd_stats(args) -> None:
    from seqdedup.core.results import ProducerCount

    with _session(args) as s:
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
                          f"{_count(stats['entries_since_snapshot'], 'entry', 'entries')} since"),
        ("catalog", f"{_count(catalog['snapshot_rows'], 'snapshot row')} in {_count(catalog['snapshots'], 'snapshot')}, "
                    f"{_count(catalog['run_log_rows'], 'run log row')}; recovery reads snapshot"
                    f"{'s' if len(catalog['chain']) != 1 else ''} {', '.join(map(str, catalog['chain'])) or 'none'}; "
                    f"{_count(catalog['changed_since_snapshot'], 'producer')} changed since"),
        ("written", stats["written"]),
        ("duplicates", f"{stats['duplicates']} ({_count(stats['repeats'], 'repeat')}, {stats['out_of_order']} out "
                       "of order)"),
        ("foreign rows", f"{stats['foreign_rows']} (rows seqdedup did not write: left out)"),
    ]
    width = max(len(label) for label, _ in facts) + 1
    lines = [f"{label + ':':<{width}} {value}" for label, value in facts]
    if counts:
        lines += ["", text_table(["producer", "written", "duplicates", "repeats", "out_of_order"],
                             [(c.producer, c.written, c.duplicates, c.repeats, c.out_of_order) for c in counts.values()])]
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
                      progress=not args.json, where=args.remote or f"{args.database}, {args.engine}")
    _emit(args, report, report["text"])
    if not report["ok"]:
        raise SystemExit(1)


def cmd_connect_server(args) -> None:
    """Start a Spark Connect server with seqdedup's settings, its catalog in the Spark home, and run until stopped."""
    from seqdedup.extensions.spark.connect_server import start_local_server

    # SIGTERM stops it as Ctrl-C does (the server is a process group of its own, which the terminal's signal misses);
    # one that comes while the server starts stops it at exit (start_local_server)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        server = start_local_server(args.database, master=args.master, port=args.port or None,
                                    lock_timeout=args.lock_timeout, metastore=args.metastore)
        try:
            home = Path(args.database).resolve()
            _emit(args, {"url": server.url, "home": str(home), "log": str(server.log)},
                  f"Spark Connect server ready at {server.url} (catalog in {home}; log: {server.log})\n"
                  f"run commands on it with --remote {server.url}, or: export {REMOTE_VARIABLE}={server.url}\n"
                  "stop it with Ctrl-C")
            sys.stdout.flush()
            code = server.process.wait()
            raise SeqdedupError(f"the Spark Connect server exited with {code}; its log: {server.log}")
        finally:
            server.stop()


def _policy_list() -> str:
    """Every policy the code knows (catalog/policies.py), with the values it takes and its default: the epilog of
    the commands that set policies."""
    defaults = Policies()
    columns = max(shutil.get_terminal_size().columns - 2, 60)      # (as argparse wraps its own help)
    width = max(map(len, DEFINITIONS)) + 2
    lines = textwrap.wrap("policies (-p NAME=VALUE; an empty VALUE unsets it, and then the namespace's, the global or "
                          "the default value applies; docs/semantics.md says what each does):", columns)
    for name, definition in DEFINITIONS.items():
        text = f"{definition.help}; default {spelled(name, getattr(defaults, name))}"
        lines += textwrap.wrap(text, columns, initial_indent=f"  {name:<{width}}", subsequent_indent=" " * (width + 2))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON for scripts")
    output.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    home = argparse.ArgumentParser(add_help=False)      # where a Spark session this process starts keeps its catalog
    home.add_argument("--database", "-d", default=None,
                      help="DuckDB: the database file (default seqdedup.duckdb in the working folder; "
                           "seqdedup-demo.duckdb for the demo). Spark: the folder of the local session's "
                           "warehouse and Hive metastore (default seqdedup-spark). Not with --remote: the server's "
                           "catalog is the one it was started with")
    home.add_argument("--master", default=None, help="Spark master URL (with --engine spark; default local[2])")
    home.add_argument("--metastore", default=None, metavar="URL",
                      help="a Hive metastore shared with other Spark drivers: thrift://HOST:PORT, or "
                           "jdbc:postgresql://HOST:PORT/DB?user=U&password=P (default: $%s; implies --engine spark). "
                           "Without it, a Spark home keeps its own metastore (embedded Derby), which one process "
                           "at a time may open" % METASTORE_VARIABLE)
    home.add_argument("--lock-timeout", type=float, default=60.0, metavar="SECONDS",
                      help="how long to wait for another writer of the database (default 60)")
    common = argparse.ArgumentParser(add_help=False, parents=[home, output])
    common.add_argument("--engine", default=None, choices=["duckdb", "spark"],
                        help="engine: duckdb (default, embedded) or spark (PySpark; a local session in this process, "
                             "which starts a JVM, unless --remote)")
    common.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                        help=f"run on the Spark Connect server at this URL, with no JVM in this process (default: "
                             f"${REMOTE_VARIABLE}, unless --engine duckdb); seqdedup connect-server starts one")
    yes = argparse.ArgumentParser(add_help=False)
    yes.add_argument("--yes", action="store_true",
                     help="confirm a change that turns deduplication off on a topic, which forgets its producers' "
                          "marks (R10: once it is on again, the ids they sent before are accepted again); with topic "
                          "drop, confirm that the topic, its entries and its state are deleted for good")
    setting = argparse.ArgumentParser(add_help=False, parents=[yes])
    setting.add_argument("--policy", "-p", action="append", metavar="NAME=VALUE",
                         help="a policy to set, repeatable; an empty VALUE unsets it (the policies are listed below)")
    policies = dict(epilog=_policy_list(), formatter_class=argparse.RawDescriptionHelpFormatter)

    top = argparse.ArgumentParser(prog="seqdedup", description="Effectively-once ingestion for tables, as SQL. Each "
                                  "command takes --engine, --remote, --database and --json (seqdedup COMMAND --help).")
    top.add_argument("--version", action="version", version=f"seqdedup {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("init", parents=[common], help="create the catalog").set_defaults(func=cmd_init)

    topic = sub.add_parser("topic", parents=[common, setting], help="list topics; create, alter, show or drop one; "
                           "quarantine its rows seqdedup did not write", **policies)
    topic.add_argument("action", choices=["list", "create", "alter", "show", "drop", "quarantine"],
                       help="what to do: list every topic, or create, alter (its policies), show, drop or quarantine "
                            "(move its rows seqdedup did not write aside) the topic NAME")
    topic.add_argument("name", nargs="?", help="the topic: NAME, or NAMESPACE.NAME")
    topic.add_argument("--column", "-c", action="append", metavar="NAME:TYPE",
                       help="with create: a column and its Spark SQL type (payload:STRING), repeatable")
    topic.set_defaults(func=cmd_topic)

    namespace = sub.add_parser("namespace", parents=[common, setting], help="set a namespace's policies (a DuckDB "
                               "schema, a Spark database), for its topics that set none of their own", **policies)
    namespace.add_argument("action", choices=["alter"], help="alter: set or unset the namespace's policies")
    namespace.add_argument("name", metavar="NAMESPACE", help="the namespace (main on DuckDB, default on Spark)")
    namespace.set_defaults(func=cmd_namespace)

    global_ = sub.add_parser("global", parents=[common, setting], help="set the global policies, for every topic "
                             "whose topic and namespace set none", **policies)
    global_.add_argument("action", choices=["alter"], help="alter: set or unset the global policies")
    global_.set_defaults(func=cmd_global)

    sql = sub.add_parser("sql", parents=[common], help="run SQL statements (Spark SQL by default)")
    sql.add_argument("statement", nargs="?", help="statements, separated by ; (or give --file)")
    sql.add_argument("--file", "-f", help="a file of statements, separated by ;")
    sql.add_argument("--dialect", default="spark", choices=["spark", "duckdb"],
                     help="the SQL dialect the statements are written in (default spark, on either engine)")
    sql.set_defaults(func=cmd_sql)

    ingest = sub.add_parser("ingest", parents=[common], help="ingest JSON lines, CSV or Parquet into a topic")
    ingest.add_argument("topic", help="the topic to write: NAME, or NAMESPACE.NAME")
    ingest.add_argument("path", nargs="+", help="files, globs (quoted: 'data/*.jsonl'), or - for standard input "
                                                "(JSON lines unless --format says otherwise)")
    ingest.add_argument("--producer-column", required=True, metavar="COLUMN",
                        help="the column of each row's producer name (exactly as written, case included)")
    ingest.add_argument("--sequence-column", required=True, metavar="COLUMN",
                        help="the column of each row's sequence id")
    ingest.add_argument("--highest-column", metavar="COLUMN",
                        help="the column of a batch entry's highest sequence id (a row that stands for ids from "
                             "the sequence id to this one)")
    ingest.add_argument("--order-by", metavar="COLUMN",
                        help="the column that gives the rows' arrival order (default: the order of the input)")
    ingest.add_argument("--format", choices=["json", "csv", "parquet"], help="default: from the file name")
    ingest.add_argument("--batch-rows", type=int, metavar="N", help="rows per statement (default 1,000,000)")
    ingest.add_argument("--one-commit", action="store_true",
                        help="the whole input as one statement: all of it is written, or nothing")
    ingest.add_argument("--no-progress", action="store_true", help="no progress bar (none is shown with --json)")
    ingest.set_defaults(func=cmd_ingest)

    for name, func, text in (("state", cmd_state, "show the recovered producer marks of a topic"),
                             ("snapshot", cmd_snapshot, "take a snapshot now (and purge idle producers)"),
                             ("recover", cmd_recover, "rebuild a topic's state and check it against the log"),
                             ("stats", cmd_stats, "what a topic holds and what was dropped")):
        command = sub.add_parser(name, parents=[common], help=text)
        command.add_argument("topic", help="the topic: NAME, or NAMESPACE.NAME")
        command.set_defaults(func=func)
        if name == "recover":
            command.add_argument("--repair", action="store_true",
                                 help="when the state differs from a replay of the log, write the replayed marks")

    compact = sub.add_parser("compact", parents=[common], help="merge a topic's commits into fewer partitions "
                                                               "(Spark: one per commit until compacted)")
    compact.add_argument("topic", help="the topic: NAME, or NAMESPACE.NAME")
    compact.add_argument("--factor", type=int, default=FACTOR,
                         help=f"partitions of one tier merged into one of the next (default {FACTOR})")
    compact.set_defaults(func=cmd_compact)

    demo = sub.add_parser("demo", parents=[common], help="producers that retry, crash and restart; each message lands once")
    demo.add_argument("--producers", type=int, default=4, help="how many producers write (default 4)")
    demo.add_argument("--messages", type=int, default=1000, help="messages per producer (default 1000)")
    demo.add_argument("--seed", type=int, default=7, help="the seed of the crashes and retries (default 7)")
    demo.set_defaults(func=cmd_demo)

    server = sub.add_parser("connect-server", parents=[home, output], help="run a Spark Connect server with "
                            "seqdedup's settings, its catalog in the Spark home, for --remote (until Ctrl-C)")
    server.add_argument("--port", type=int, default=SERVER_PORT,
                        help=f"the port it listens on, on 127.0.0.1 (default {SERVER_PORT}; 0: any free port)")
    server.set_defaults(func=cmd_connect_server, engine="spark")
    return top


def _resolve(args) -> None:
    """Where the command runs: --remote (or $SEQDEDUP_REMOTE, which a command line's --engine duckdb overrides), else
    the engine; and the defaults that depend on it."""
    if args.metastore is not None:
        _metastore_clashes(args)
    elif os.environ.get(METASTORE_VARIABLE) and args.engine != "duckdb" and not vars(args).get("remote"):
        if os.environ.get(REMOTE_VARIABLE):
            raise SeqdedupError(f"both {METASTORE_VARIABLE} and {REMOTE_VARIABLE} are set: run on the Spark Connect "
                                "server, or start a session of this command's own on the shared metastore; unset one "
                                "(or give --remote or --metastore)")
        args.metastore = os.environ[METASTORE_VARIABLE]
    if args.metastore is not None:
        args.engine = "spark"
    if "remote" in vars(args):          # (connect-server starts a server: it runs on none)
        given = args.remote is not None
        if not given and args.engine != "duckdb" and args.metastore is None:
            args.remote = os.environ.get(REMOTE_VARIABLE) or None
        if args.remote:
            source = f"--remote {args.remote}" if given else f"{REMOTE_VARIABLE}={args.remote}"
            for flag, clash in (("--engine duckdb", args.engine == "duckdb"),
                                ("--database", args.database is not None), ("--master", args.master is not None)):
                if clash:
                    raise SeqdedupError(f"{flag} does not go with {source}: the command runs on that Spark Connect "
                                        "server, on the catalog it was started with (seqdedup connect-server -d "
                                        f"HOME); leave out {flag}" + ("" if given else f", or unset {REMOTE_VARIABLE}"))
            args.engine = "spark"
    args.engine = args.engine or "duckdb"
    args.master = args.master or "local[2]"
    if args.database is None:
        if args.engine == "spark":
            args.database = "seqdedup-spark"
        else:
            args.database = "seqdedup-demo.duckdb" if args.func is cmd_demo else "seqdedup.duckdb"


def _metastore_clashes(args) -> None:
    """A shared metastore is for a Spark session this process starts (or the server it starts): not for DuckDB, nor
    for a command that runs on a Spark Connect server, whose metastore is the one the server was started with."""
    if args.engine == "duckdb":
        raise SeqdedupError("--metastore does not go with --engine duckdb: a metastore is for a Spark session this "
                            "command starts; leave out one of them")
    if vars(args).get("remote"):
        raise SeqdedupError("--metastore does not go with --remote: the command runs on that Spark Connect server, "
                            "on the metastore it was started with (seqdedup connect-server --metastore URL); leave "
                            "out one of them")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)     # (repeated in a message that asks for --yes)
    args.spark = None                                           # the Spark Connect session of --remote
    shown = warnings.showwarning

    def warn(message, category, *rest):       # a warning of seqdedup's: one line, as errors are
        if issubclass(category, SeqdedupWarning):
            print(f"seqdedup: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest)

    try:
        _resolve(args)
        with warnings.catch_warnings():
            warnings.showwarning = warn
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
    finally:
        if args.spark is not None:
            with contextlib.suppress(Exception):    # (the command's outcome is known: a server gone since changes none)
                args.spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
