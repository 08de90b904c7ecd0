"""``seqdedup dropped TOPIC``: the ledger of the entries a topic's statements dropped, and why (R16); ``seqdedup gaps
TOPIC``: the holes they left after their producers' marks (R17); ``seqdedup report TOPIC``: both, with the run log,
drawn as a page."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from seqdedup.core.results import text_table
from seqdedup.errors import SeqdedupError
from seqdedup.report import page

from .output import emit
from .target import open_session


def since(text: str) -> dt.datetime:
    """``--since``: an ISO date or time (2026-11-30, 2026-11-30T09:00), in the catalog's time (its clock's)."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise SeqdedupError(f"--since {text!r} is not a date or time: give it as 2026-11-30 or 2026-11-30T09:00")


def cmd_dropped(args) -> None:
    with open_session(args) as s:
        rows = s.dropped(args.topic, producer=args.producer, since=since(args.since) if args.since else None,
                         reason=args.reason, limit=args.limit)
    text = text_table(rows.columns, rows.rows) if rows.rows else (
        "no dropped entry in the ledger (a topic keeps one where its dropped_entries policy is keys or rows)")
    emit(args, rows.to_dict(), text)


def cmd_gaps(args) -> None:
    with open_session(args) as s:
        rows = s.gaps(args.topic, producer=args.producer)
    text = text_table(rows.columns, rows.rows) if rows.rows else (
        "no hole recorded (a topic records them where its gap_policy is record)")
    emit(args, rows.to_dict(), text)


def cmd_report(args) -> None:
    with open_session(args) as s:
        report = s.report(args.topic, since=since(args.since) if args.since else None, commits=args.commits)
    out = Path(args.out or f"{report.topic}-report.html")
    out.write_text(page(report), encoding="utf-8")
    totals = report.totals()
    emit(args, {"out": str(out.resolve()), **report.to_dict()},
         f"{out}: {report.topic}, {len(report.commits)} commits: wrote {totals['written']}, dropped "
         f"{totals['dropped']}, {totals['holes']} holes")
