"""The process test_send_async_kill.py kills: a producer sends entries with send_async, each with its source offset
as its explicit id, and reports every acknowledgement as it comes.

    python send_async_child.py ENGINE DATABASE COUNT GROUP

Prints {"resumed": mark} on opening, {"ack": [offset, position, duplicate]} per settled entry (from the producer's
sending thread, as the future completes), and {"entries": [[offset, position, commit], ...]} after ``close`` (a killed
process prints no more lines). Every run sends offsets 0 .. COUNT-1, in groups of GROUP entries.
"""
from __future__ import annotations

import json
import sys
import threading

import seqdedup

_print = threading.Lock()


def say(line: dict) -> None:
    with _print:
        print(json.dumps(line), flush=True)


def main() -> None:
    engine, database, count, group = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if engine == "spark":
        from seqdedup.extensions.spark import local_session

        session = seqdedup.connect(local_session(database))
    else:
        session = seqdedup.connect(database)
    if not any(topic.endswith(".events") for topic in session.topics()):
        session.create_topic("events", {"payload": "STRING"})
    producer = session.producer("events", name="source", batching_max_messages=group)
    say({"resumed": producer.last_sequence_id})

    def acknowledge(future) -> None:
        receipt = future.result()
        say({"ack": [receipt.sequence_id, receipt.position, receipt.duplicate]})

    for offset in range(count):
        producer.send_async({"payload": f"m{offset}", "offset": offset}, sequence_id="offset").add_done_callback(
            acknowledge)
    producer.close()
    rows = session.sql("SELECT _sequence_id, _position, _commit FROM events WHERE _producer = 'source'").rows
    say({"entries": sorted([list(row) for row in rows])})
    session.close()


if __name__ == "__main__":
    main()
