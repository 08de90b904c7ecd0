"""A producer that batches, as Pulsar's does, on every engine: ``send_async`` queues one entry and returns a future;
entries are grouped by count (and bytes, and a delay), each group one statement; a future completes with its entry's
receipt once the group's commit is durable, or with the error that refused its group; a group whose outcome is unknown
is retried under the same ids; ``send``, ``flush`` and ``close`` wait for what was queued before them.

Each group is a statement (seconds on Spark): the tests use groups of a few entries and few groups.
"""
from __future__ import annotations

import threading

import pytest

from seqdedup import TopicError, failpoints
from seqdedup.errors import ProducerError

from .test_producer import outcomes, topic_rows


@pytest.fixture(autouse=True)
def no_leftover_faults():
    yield
    failpoints._injected.clear()


def test_entries_are_grouped_and_each_future_gets_its_own_receipt(dedup):
    dedup.topic()
    called = []
    # a delay no test waits out: a group goes when it is full, or is flushed
    with dedup.session.producer("events", name="auto", batching_max_messages=4,
                                batching_max_publish_delay=600) as producer:
        futures = [producer.send_async({"payload": f"m{i}"}) for i in range(7)]
        futures[0].add_done_callback(called.append)
        assert producer.pending >= 1          # (the seventh waits for a full group or a flush)
        producer.flush()
        assert producer.pending == 0 and all(f.done() for f in futures) and called == [futures[0]]
        automatic = [f.result() for f in futures]
    # explicit ids decide in arrival order, as a send does: 3 came after 5, 5 again is a repeat
    with dedup.session.producer("events", name="explicit", batching_max_messages=10) as producer:
        explicit = [producer.send_async({"payload": f"e{s}", "id": s}, sequence_id="id") for s in (5, 3, 5, 7)]
    explicit = [f.result(timeout=0) for f in explicit]       # (close sent them)
    assert outcomes(automatic) == [(s, False) for s in range(7)]
    assert outcomes(explicit) == [(5, False), (3, True), (5, True), (7, False)]
    positions = topic_rows(dedup)
    assert [r.position for r in automatic] == [positions[("auto", s)] for s in range(7)]
    assert [explicit[0].position, explicit[3].position] == [positions[("explicit", 5)], positions[("explicit", 7)]]
    # one commit per group: 4 + 3 automatic, then the 4 explicit entries together
    commits = dedup.session.sql("SELECT _producer, count(DISTINCT _commit) FROM events GROUP BY _producer").rows
    assert sorted(commits) == [("auto", 2), ("explicit", 1)]
    assert dedup.position_problem() is None


def test_a_send_waits_for_the_queued_entries_and_a_refused_group_fails_its_futures_only(dedup):
    dedup.topic()
    producer = dedup.session.producer("events", name="p", batching_max_messages=2, batching_max_publish_delay=600)
    first = producer.send_async(("a",))
    # the synchronous send goes after the entry queued before it, with the next id
    assert outcomes(producer.send([("b",)])) == [(1, False)]
    assert outcomes([first.result(timeout=0)]) == [(0, False)]
    # a group with a value of the wrong shape is refused whole, and takes no ids
    refused = [producer.send_async(("c",)), producer.send_async(("d", "extra"))]
    after = producer.send_async(("e",))
    producer.flush()
    for future in refused:
        assert isinstance(future.exception(), TopicError) and "one value per column" in str(future.exception())
        with pytest.raises(TopicError):
            future.result()
    assert outcomes([after.result()]) == [(2, False)]
    producer.close()
    with pytest.raises(ProducerError, match="closed"):
        producer.send_async(("f",))
    assert sorted(dedup.session.sql("SELECT _sequence_id, payload FROM events").rows) == [(0, "a"), (1, "b"),
                                                                                            (2, "e")]


def test_a_group_whose_outcome_is_unknown_is_retried_under_the_same_ids(dedup):
    dedup.topic()
    # the commit is durable but its answer is lost, then a commit fails before it is published: both settle
    failpoints.inject("after_publish", ConnectionError("lost after the commit"))
    with dedup.session.producer("events", name="p", batching_max_messages=2) as producer:
        futures = [producer.send_async((f"m{i}",)) for i in range(2)]
        outcome = [f.result(timeout=120) for f in futures]
        failpoints.inject("before_publish", ConnectionError("lost before the commit"))
        futures = [producer.send_async((f"m{i}",)) for i in range(2, 4)]
    outcome += [f.result(timeout=0) for f in futures]
    assert outcomes(outcome) == [(s, False) for s in range(4)]
    positions = topic_rows(dedup)
    assert [r.position for r in outcome] == [positions[("p", s)] for s in range(4)]


def test_batching_settings_are_checked_and_threads_may_share_a_batching_producer(dedup):
    dedup.topic()
    for setting, value, message in [("batching_max_messages", 0, "positive integer"),
                                    ("batching_max_bytes", 1.5, "positive integer"),
                                    ("batching_max_publish_delay", -1, "seconds"),
                                    ("batching_max_pending_messages", 5, "at least batching_max_messages")]:
        with pytest.raises(ProducerError, match=message):
            dedup.session.producer("events", name="bad", **{"batching_max_messages": 10, setting: value})
    futures = []
    with dedup.session.producer("events", name="shared", batching_max_messages=1_000) as producer:
        def send(thread: int) -> None:
            futures.extend(producer.send_async((f"t{thread}-{i}",)) for i in range(50))

        threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    ids = sorted(f.result(timeout=0).sequence_id for f in futures)
    assert ids == list(range(200)) and len(topic_rows(dedup)) == 200
