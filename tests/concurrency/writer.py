"""A writer process of test_processes.py: writer ``a`` or ``b`` of scenario C17 (c17.py), or a holder.

    python writer.py ENGINE DATABASE WRITER SIZE LOCK_TIMEOUT [--hold SECONDS]

DuckDB: every statement opens the database, writes and closes it, so that writer processes take turns at the
file's lock. Spark: the process opens the Spark home once (its embedded Derby admits one process until the end).
With ``--hold`` it keeps the database that long after opening it, before it writes. Prints JSON lines:
{"opened": pid} the first time it has the database, {"sent": [written, duplicates, conflicts]} per statement,
{"entries": [...], "at": time} at the end (the topic as it saw it last), or {"error": message} (exit 3) when it
gave up waiting.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repository, for tests.concurrency.c17

import seqdedup  # noqa: E402
from seqdedup import EngineError  # noqa: E402
from tests.concurrency import c17  # noqa: E402


def say(**line) -> None:
    print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine")
    parser.add_argument("database")
    parser.add_argument("writer")
    parser.add_argument("size", type=int)
    parser.add_argument("lock_timeout", type=float)
    parser.add_argument("--hold", type=float)
    args = parser.parse_args()

    def connect():
        if args.engine == "spark":
            from seqdedup.extensions.spark import local_session

            return seqdedup.connect(local_session(args.database, lock_timeout=args.lock_timeout))
        return seqdedup.connect(args.database, lock_timeout=args.lock_timeout)

    try:
        session = connect()
        say(opened=os.getpid())
        session.create_topic(c17.TOPIC, {"payload": "STRING"}, if_not_exists=True)
        time.sleep(args.hold or 0)
        for rows in c17.statements(args.writer, args.size):
            if args.engine == "duckdb":
                session.close()
                session = connect()
            result = c17.send(session, args.writer, rows)
            say(sent=[result.written, result.duplicates, result.conflicts])
        say(entries=c17.topic_entries(session), at=time.time())
        session.close()
    except EngineError as error:
        say(error=str(error))
        sys.exit(3)


if __name__ == "__main__":
    main()
