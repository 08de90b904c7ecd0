"""The commands that run statements: ``sql`` (statements as written) and ``ingest`` (files into a topic)."""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from seqdedup.errors import SeqdedupError, SeqdedupWarning

from .output import emit, result_text
from .target import open_session


def cmd_sql(args) -> None:
    text = Path(args.file).read_text() if args.file else args.statement
    if not text:
        raise SeqdedupError("give a statement, or --file with statements")
    with open_session(args) as s:
        results = s.sql_all(text, dialect=args.dialect)
        shown = [r.to_dict() for r in results]
        # one statement: its object; several: a list of them, in order (as Session.sql and Session.sql_all return)
        emit(args, shown[0] if len(shown) == 1 else shown, "\n".join(result_text(r) for r in results))


def cmd_ingest(args) -> None:
    from seqdedup.clients.ingest import BATCH_ROWS, ingest

    if args.one_commit and args.batch_rows is not None:
        raise SeqdedupError("--one-commit writes the whole input as one statement; leave out --batch-rows")
    with contextlib.ExitStack() as stack:
        paths = [_stdin(stack, args.format) if path == "-" else path for path in args.path]
        if args.remote:         # the server reads the files: relative to its own folder, they would be other files
            paths = [os.path.abspath(path) for path in paths]
        s = stack.enter_context(open_session(args))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeqdedupWarning)    # said below, once, in the result's own words
            result = ingest(s, args.topic, paths, producer=args.producer_column, sequence_id=args.sequence_column,
                            highest_sequence_id=args.highest_column, order_by=args.order_by, fmt=args.format,
                            batch_rows=BATCH_ROWS if args.batch_rows is None else args.batch_rows,
                            one_commit=args.one_commit,
                            progress=not args.json and not args.no_progress)
        late = f" ({result['out_of_order']} of them out of order)" if result["out_of_order"] else ""
        emit(args, result, f"{args.topic}: wrote {result['written']}, dropped {result['duplicates']} duplicates"
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
