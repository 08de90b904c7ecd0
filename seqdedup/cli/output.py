"""What a command prints: its value as JSON with ``--json``, else its text; a statement's result as text."""
from __future__ import annotations

import json

from seqdedup.core.results import text_table


def emit(args, value, text: str | None = None) -> None:
    if args.json:
        print(json.dumps(value, default=str, indent=2))
    elif text is not None:
        print(text)


def result_text(result) -> str:
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


def counted(number: int, word: str, words: str | None = None) -> str:
    """``3 snapshot rows``, ``1 snapshot row``."""
    return f"{number} {word if number == 1 else words or word + 's'}"
