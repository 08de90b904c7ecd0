"""The lease protocol of R14 across drivers (seqdedup/core/leases.py) on a store in memory, with leases of a fraction of
a second: its paths in time that the drivers' test (tests/concurrency/test_drivers.py, real processes on a real
metastore) cannot reach in a few seconds: renewals that fail, a lapse nobody used, a release read at once, an engine
session stopped under an open producer; and a statement's check of the names it writes against other drivers' leases.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from seqdedup.errors import ProducerError
from seqdedup.core.leases import Lease, lease_key, refuse_held_names

SECONDS = 0.3        # renewed every 0.1 s


class Store:
    """A metastore in memory: an epoch registers once; ``down`` makes every call fail."""

    application = "app-1"

    def __init__(self):
        self.epochs_of: dict[tuple[str, int], tuple[dict, float]] = {}
        self.calls = 0
        self.down = False
        self.stopped = False        # the engine's session was stopped

    def _call(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("the metastore does not answer")

    def epochs(self, key):
        self._call()
        return [epoch for k, epoch in self.epochs_of if k == key]

    def read(self, key, epoch):
        self._call()
        properties, claimed_at = self.epochs_of[key, epoch]
        return dict(properties), claimed_at

    def register(self, key, epoch, at):
        self._call()
        return self.epochs_of.setdefault((key, epoch), ({}, at))[1] == at

    def write(self, key, epoch, properties):
        self._call()
        self.epochs_of[key, epoch][0].update(properties)

    def latest(self, keys):
        self._call()
        found = {}
        for key, epoch in self.epochs_of:
            if key in keys:
                found[key] = max(found.get(key, 0), epoch)
        return found


def lease(store: Store) -> Lease:
    taken = Lease(store, "main.events", "n", SECONDS)
    taken.acquire()
    return taken


def test_a_held_name_is_refused_and_a_released_one_is_free_at_once():
    store = Store()
    first = lease(store)
    time.sleep(SECONDS * 2)                  # renewed meanwhile
    with pytest.raises(ProducerError, match=r"'n' is already connected to topic main.events from another driver "
                                            r"\(host .*, process \d+, Spark application app-1\); its lease expires"):
        lease(store)
    first.close()
    second = lease(store)                    # at once, whatever the clocks say
    assert second.epoch == first.epoch + 1
    second.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("seqdedup-lease")]


def test_renewals_that_fail_wait_their_turn_and_a_lapse_nobody_used_is_claimed_again():
    store = Store()
    held = lease(store)
    store.down = True
    calls = store.calls
    time.sleep(SECONDS * 2)
    assert store.calls - calls <= 7          # a try every third of the lease time (about 6), not a loop
    store.down = False
    held.check()                             # lapsed, nobody took it: the next epoch is its own
    assert held.epoch == 2
    held.close()


def test_a_holder_whose_name_was_taken_is_fenced_for_good():
    store = Store()
    paused = lease(store)
    paused._stop.set()                       # its renewals stop, as in a long pause
    paused._thread.join()
    time.sleep(SECONDS * 1.5)                # (lapsed for sure, even past a renewal the stop met halfway)
    taker = lease(store)
    for _ in range(2):
        with pytest.raises(ProducerError, match="'n' lost its name on topic main.events to another driver"):
            paused.check()
    taker.close()
    with pytest.raises(ProducerError, match="lost its name"):      # the name free again changes nothing
        paused.check()
    paused.close()


def test_renewals_end_when_the_engine_session_is_stopped_under_an_open_lease():
    store = Store()
    held = lease(store)
    store.down = store.stopped = True        # spark.stop() with the producer open
    held._thread.join(SECONDS * 3)
    assert not held._thread.is_alive()       # no retry every third of the lease time for the life of the process
    held.close()


def test_a_statement_is_refused_a_name_a_live_lease_of_another_driver_holds():
    store = Store()
    store.application = "app-2"              # the other driver's
    other = lease(store)
    store.application = "app-1"              # this one's
    adapter = SimpleNamespace(identity="db", lease_store=store)
    topic = SimpleNamespace(ref=SimpleNamespace(key="main.events"),
                            applied=SimpleNamespace(producer_lease_seconds=SECONDS))
    refuse_held_names(adapter, topic, ["m", "o"])          # names nobody holds
    calls = store.calls
    with pytest.raises(ProducerError, match=r"producer 'n' is connected to topic main.events \(a live Producer of "
                                            r"another driver: host .*, Spark application app-2; its lease expires at "
                                            r".*\): a statement may not write entries under a name a live producer "
                                            r"holds.*Nothing was written"):
        refuse_held_names(adapter, topic, ["m", "n"])
    assert store.calls - calls == 2                        # the latest epochs of every name at once, one read
    # another topic's name; then a released lease, and a live one of this driver's own (its producer is connected
    # in this process, and judged there)
    refuse_held_names(adapter, SimpleNamespace(ref=SimpleNamespace(key="main.other"), applied=topic.applied), ["n"])
    other.close()
    refuse_held_names(adapter, topic, ["n"])
    own = lease(store)
    assert store.latest({lease_key("main.events", "n")}) == {lease_key("main.events", "n"): own.epoch}
    refuse_held_names(adapter, topic, ["n"])
    own.close()
