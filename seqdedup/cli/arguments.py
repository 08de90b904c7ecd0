"""The command line's arguments: each command's parser, its options and the function that runs it."""
from __future__ import annotations

import argparse
import shutil
import textwrap

from seqdedup import __version__
from seqdedup.catalog.policies import DEFINITIONS, spelled
from seqdedup.clients.ingest import BATCH_ROWS
from seqdedup.core.compaction import FACTOR
from seqdedup.core.drops import COMMITS
from seqdedup.udfs import REASONS, Policies

from .catalog import cmd_global, cmd_init, cmd_namespace, cmd_topic
from .demo import cmd_demo
from .dropped import cmd_dropped, cmd_gaps, cmd_report
from .server import SERVER_PORT, cmd_connect_server
from .statements import cmd_ingest, cmd_sql
from .target import METASTORE_VARIABLE, REMOTE_VARIABLE
from .upkeep import cmd_compact, cmd_recover, cmd_snapshot, cmd_state, cmd_stats


def _at_least(least: int, most: int | None = None):
    """An argparse type: a whole number from ``least`` (to ``most``). A value out of range is refused by the
    parser, naming the option (``argument --commits: 1 or more, not 0``), before the command opens a session."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
        if value < least or (most is not None and value > most):
            wanted = f"{least} or more" if most is None else f"{least} to {most}"
            raise argparse.ArgumentTypeError(f"{wanted}, not {value}")
        return value
    return whole


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
    topic.add_argument("--id-parts", type=int, metavar="N",
                       help="with create: the topic's sequence ids are composite, tuples of N (1 to 3) unsigned 64-bit "
                            "integers (a CDC position such as (lsn, index), R19); left out, BIGINT")
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
    ingest.add_argument("--sequence-column", required=True, metavar="COLUMN", action="append",
                        help="the column of each row's sequence id; for a topic of composite ids (R19), once per "
                             "part, in order: --sequence-column lsn --sequence-column index")
    ingest.add_argument("--highest-column", metavar="COLUMN",
                        help="the column of a batch entry's highest sequence id (a row that stands for ids from "
                             "the sequence id to this one)")
    ingest.add_argument("--order-by", metavar="COLUMN",
                        help="the column that gives the rows' arrival order (default: the order of the input)")
    ingest.add_argument("--format", choices=["json", "csv", "parquet"], help="default: from the file name")
    ingest.add_argument("--batch-rows", type=_at_least(1), metavar="N",
                        help=f"rows per statement (default {BATCH_ROWS:,})")
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

    dropped = sub.add_parser("dropped", parents=[common], help="the entries a topic's statements dropped, and why "
                             "(its ledger: where its dropped_entries policy is keys or rows)")
    dropped.add_argument("topic", help="the topic: NAME, or NAMESPACE.NAME")
    dropped.add_argument("--producer", help="only this producer's entries (its name exactly, case included)")
    dropped.add_argument("--since", metavar="TIME", help="only entries dropped at this time or later (2026-11-30, "
                                                         "2026-11-30T09:00)")
    dropped.add_argument("--reason", choices=REASONS, help="only entries dropped for this reason")
    dropped.add_argument("--limit", type=_at_least(0), metavar="N", help="at most N rows, the oldest first")
    dropped.set_defaults(func=cmd_dropped)

    gaps = sub.add_parser("gaps", parents=[common], help="the holes a topic's statements left after their producers' "
                          "marks (recorded where its gap_policy is record)")
    gaps.add_argument("topic", help="the topic: NAME, or NAMESPACE.NAME")
    gaps.add_argument("--producer", help="only this producer's holes (its name exactly, case included)")
    gaps.set_defaults(func=cmd_gaps)

    report = sub.add_parser("report", parents=[common], help="a page of charts of what a topic's statements dropped "
                            "and why, per commit and per producer (one HTML file)")
    report.add_argument("topic", help="the topic: NAME, or NAMESPACE.NAME")
    report.add_argument("--since", metavar="TIME", help="only commits of statements run at this time or later "
                                                        "(2026-11-30, 2026-11-30T09:00)")
    report.add_argument("--commits", type=_at_least(1), default=COMMITS, metavar="N",
                        help=f"the latest N commits at most (default {COMMITS})")
    report.add_argument("--out", metavar="FILE", help="the page to write (default TOPIC-report.html, TOPIC the "
                                                      "topic's NAMESPACE.NAME)")
    report.set_defaults(func=cmd_report)

    compact = sub.add_parser("compact", parents=[common], help="merge a topic's commits into fewer partitions "
                                                               "(Spark: one per commit until compacted)")
    compact.add_argument("topic", help="the topic: NAME, or NAMESPACE.NAME")
    compact.add_argument("--factor", type=_at_least(2), default=FACTOR,
                         help=f"partitions of one tier merged into one of the next (default {FACTOR})")
    compact.set_defaults(func=cmd_compact)

    demo = sub.add_parser("demo", parents=[common],
                          help="producers that retry, crash and restart; each message lands once")
    demo.add_argument("--producers", type=_at_least(1), default=4, help="how many producers write (default 4)")
    demo.add_argument("--messages", type=_at_least(1), default=1000, help="messages per producer (default 1000)")
    demo.add_argument("--seed", type=int, default=7, help="the seed of the crashes and retries (default 7)")
    demo.set_defaults(func=cmd_demo)

    server = sub.add_parser("connect-server", parents=[home, output], help="run a Spark Connect server with "
                            "seqdedup's settings, its catalog in the Spark home, for --remote (until Ctrl-C)")
    server.add_argument("--port", type=_at_least(0, 65535), default=SERVER_PORT,
                        help=f"the port it listens on, on 127.0.0.1 (default {SERVER_PORT}; 0: any free port)")
    server.set_defaults(func=cmd_connect_server, engine="spark")
    return top
