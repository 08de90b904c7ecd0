"""``seqdedup connect-server``: a Spark Connect server with seqdedup's settings, for the commands' ``--remote``."""
from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path

from seqdedup.errors import SeqdedupError

from .output import emit
from .target import REMOTE_VARIABLE

#: Where ``seqdedup connect-server`` listens unless told otherwise: Spark Connect's own default port.
SERVER_PORT = 15002


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
            emit(args, {"url": server.url, "home": str(home), "log": str(server.log)},
                  f"Spark Connect server ready at {server.url} (catalog in {home}; log: {server.log})\n"
                  f"run commands on it with --remote {server.url}, or: export {REMOTE_VARIABLE}={server.url}\n"
                  "stop it with Ctrl-C")
            sys.stdout.flush()
            code = server.process.wait()
            raise SeqdedupError(f"the Spark Connect server exited with {code}; its log: {server.log}")
        finally:
            server.stop()
