"""The process test_consumer_kill.py kills: it fills a topic, or consumes it into an aggregate, and says what it sees.

    python consumer_child.py ENGINE DATABASE --setup N     # topic ``payments`` with N entries (amount BIGINT)
    python consumer_child.py ENGINE DATABASE --consume K   # consume it, K entries a batch, into ``totals``
    python consumer_child.py ENGINE DATABASE --setup N --consume K --crash-at POINT:N     # both, then dies

Prints one JSON line per step: {"setup": {"amounts": [...]}} after the setup; {"state": ...} on opening and
{"consumed": ...} at the end of a consume run (a killed process prints no more lines). A state is the consumer's
stored position and the sums of the output (``SELECT count(*) AS n, sum(amount) AS total FROM new_entries`` per
batch). ``--crash-at`` picks the step of the consuming it dies at: it sets ``SEQDEDUP_CRASH_AT`` (see
seqdedup/failpoints.py) once the setup is done, so that the setup's commits do not count.
"""
from __future__ import annotations

import argparse
import json
import os

from sqlglot import exp

import seqdedup
from seqdedup.catalog.state import literal
from seqdedup.clients.consumer import consume, consumer_position
from seqdedup.failpoints import ENVIRONMENT

SQL = "SELECT count(*) AS n, sum(amount) AS total FROM new_entries"


def amount(i: int) -> int:
    return i * 37 % 101 + 1


def state(session) -> dict:
    position = consumer_position(session, "payments", into="totals", consumer="totals")
    if not session.adapter.columns(session.ref("totals").table):
        return {"position": position, "n": 0, "total": 0, "rows": 0}
    n, total, rows = session.sql("SELECT coalesce(sum(n), 0), coalesce(sum(total), 0), count(*) FROM totals").rows[0]
    return {"position": position, "n": int(n), "total": int(total), "rows": rows}


def setup(session, entries: int) -> list[list[int]]:
    session.create_topic("payments", {"amount": "BIGINT"})
    values = exp.values([(literal(i), literal(amount(i))) for i in range(entries)], alias="t",
                        columns=["seq", "amount"])
    session.run(exp.Create(this=exp.table_("paid"), kind="VIEW", replace=True, expression=exp.select("*").from_(values),
                           properties=exp.Properties(expressions=[exp.TemporaryProperty()])))
    session.sql("INSERT INTO payments SELECT amount FROM paid WHERE is_not_dup('till', seq) ORDER BY seq")
    return [list(r) for r in session.sql("SELECT amount, _position FROM payments ORDER BY _position").rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine")
    parser.add_argument("database")
    parser.add_argument("--setup", type=int)
    parser.add_argument("--consume", type=int)
    parser.add_argument("--crash-at")
    args = parser.parse_args()
    if args.engine == "spark":
        from seqdedup.extensions.spark import local_session

        session = seqdedup.connect(local_session(args.database))
    else:
        session = seqdedup.connect(args.database)
    if args.setup:
        rows = setup(session, args.setup)
        print(json.dumps({"setup": {"amounts": [a for a, _ in rows], "positions": [p for _, p in rows]}}), flush=True)
    if args.crash_at:
        os.environ[ENVIRONMENT] = args.crash_at
    if args.consume:
        print(json.dumps({"state": state(session)}), flush=True)
        batches = consume(session, "payments", SQL, into="totals", consumer="totals", max_entries=args.consume)
        print(json.dumps({"consumed": {"batches": [[b.consumed_from, b.consumed_through] for b in batches],
                                       **state(session)}}), flush=True)
    session.close()


if __name__ == "__main__":
    main()
