"""The seqdedup command line: ``seqdedup init | topic | namespace | global | sql | ingest | state | snapshot | recover |
stats | compact | demo | connect-server``.

Errors print as one line on stderr and exit 1; ``--json`` prints machine-readable output; ``--debug`` re-raises. With
``--remote sc://HOST:PORT`` (or SEQDEDUP_REMOTE) every command runs on a running Spark Connect server, with no JVM of
its own (``seqdedup connect-server`` starts one with seqdedup's settings).
"""
from __future__ import annotations

import contextlib
import sys
import warnings

import sqlglot

from seqdedup.errors import SeqdedupError, SeqdedupWarning

from .arguments import parser
from .target import resolve

__all__ = ["main", "parser"]


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
        resolve(args)
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
