"""``seqdedup demo``: producers that retry, crash and restart (seqdedup/demo.py), each message landing once."""
from __future__ import annotations

from .output import emit
from .target import open_session


def cmd_demo(args) -> None:
    from seqdedup.demo import run_demo

    report = run_demo(lambda: open_session(args), producers=args.producers, messages=args.messages, seed=args.seed,
                      progress=not args.json, where=args.remote or f"{args.database}, {args.engine}")
    emit(args, report, report["text"])
    if not report["ok"]:
        raise SystemExit(1)
