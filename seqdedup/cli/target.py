"""Where a command runs: on a Spark Connect server (``--remote``, ``$SEQDEDUP_REMOTE``), in a Spark session of its
own (``--engine spark``, ``--metastore``) or on DuckDB; and the session it opens there."""
from __future__ import annotations

import os

from seqdedup.errors import SeqdedupError

#: The environment variable that stands for ``--remote`` (a command line's --engine duckdb or --remote wins over it).
REMOTE_VARIABLE = "SEQDEDUP_REMOTE"
#: The environment variable that stands for ``--metastore`` (a command line's --engine duckdb or --remote wins over it).
METASTORE_VARIABLE = "SEQDEDUP_METASTORE"


def open_session(args):
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


def resolve(args) -> None:
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
            args.database = "seqdedup-demo.duckdb" if args.command == "demo" else "seqdedup.duckdb"


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
