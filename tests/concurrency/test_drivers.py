"""Several Spark drivers on one shared metastore (PostgreSQL, started by the test), one topic, at once.

C17 across processes: nothing makes them take turns: each decides on the state it last saw and publishes its commit
by registering the topic's next partition, which the metastore lets only one driver do; the others decide again
(docs/engines/spark.md). Every entry lands exactly once, and the writers' counts add up.

R14 across processes: a producer name on a topic has one live writer among the drivers, through a lease in the
metastore (seqdedup/core/leases.py), also between Spark Connect clients of one server.

The tests share the module's driver processes (``drivers``): each costs its Spark JVM's start, 20 s and more of
CPU on 2 cores. The R14 test kills one: it comes last.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from seqdedup.core import turns
from tests.metastore import PostgresServer

from . import c17

DRIVER = Path(__file__).with_name("driver.py")
#: The topic's producer_lease_seconds in the R14 tests: renewed every 3.3 s, so a lease lapses 6.7 to 10 s after its
#: holder stops: short enough to wait for, long enough for a renewal on a loaded machine (on 2 cores, with another
#: Spark at work, a Spark Connect client's renewal came over 4 s late: its lease of 6 s lapsed, and it claimed it
#: again, a new epoch).
LEASE = 10


@pytest.fixture(scope="module")
def metastore():
    with PostgresServer() as server:
        yield server.metastore()


@pytest.fixture(scope="module")
def drivers(metastore, tmp_path_factory):
    """``drivers(n)``: the module's first n driver processes on the shared metastore, started when first asked for."""
    home, fleet = str(tmp_path_factory.mktemp("drivers") / "home"), []

    def first(n: int) -> list[Driver]:
        started = [Driver(home, metastore=metastore) for _ in range(n - len(fleet))]
        fleet.extend(driver.ready() for driver in started)
        return fleet[:n]

    yield first
    for driver in fleet:
        driver.kill()


@pytest.mark.spark
def test_c17_three_drivers_on_a_shared_metastore_write_each_entry_once(drivers, tmp_path):
    go, fleet = tmp_path / "go", drivers(3)
    for driver, writer in zip(fleet, "abc"):
        driver.tell(c17=writer, size=250, go=str(go))
    go.touch()                          # all three at once: they race for every commit
    done = [driver.answer(timeout=900) for driver in fleet]
    last = max(done, key=lambda answer: answer["at"])
    expected = c17.expected("abc")
    assert [tuple(e) for e in last["entries"]] == expected       # each distinct entry once
    written, duplicates, conflicts = (sum(s[i] for answer in done for s in answer["sent"]) for i in (0, 1, 2))
    assert (written, duplicates) == (len(expected), 3000 - len(expected))
    assert conflicts > 0                # the metastore refused some commits, and their statements decided again
    # no statement starves: one that lost turns.AFTER race claims a turn, and the others wait for it, so it
    # loses at most once more to each of the two that were deciding when it claimed (seqdedup/core/turns.py)
    most = max(s[2] for answer in done for s in answer["sent"])
    assert most <= turns.AFTER + 2, f"a statement lost {most} commit races"
    # a lost race costs the commits missed, not a recovery: each driver recovers a state once, and catches up over
    # the winners' commits after, a routine snapshot they took (one every 1,000 entries) included
    logs = [driver.output() for driver in fleet]
    caught, recovered = (sum(len(re.findall(rf"\[default\.{c17.TOPIC}\] {word} ", log)) for log in logs)
                         for word in ("caught up", "recovered"))
    whole = [why for log in logs
             for why in re.findall(r"recovering whole rather than catching up over [^:]*: (.*)", log)]
    adopted = sum(len(re.findall(r"their snapshot \d+ adopted", log)) for log in logs)
    print(f"C17, three drivers: {conflicts} lost races, {caught} catch-ups ({adopted} over a snapshot they took), "
          f"{recovered} recoveries; recovered whole: {whole}")
    # (beside each driver's first: a topic's creation by two drivers at once writes a snapshot of its own kind; a
    # statement all of whose entries another writer wrote first, a commit with no entry, is caught up over)
    assert caught > 0 and recovered <= len(fleet) * 2, (caught, recovered, conflicts, whole)
    for driver in fleet:                # a lost race is the normal path: no ERROR, no stack trace in a driver's log
        logged = re.search(r"AlreadyExists|\n\s+at [\w$.]+\(", driver.output())
        assert logged is None, driver.output()[max(0, logged.start() - 1500):logged.end() + 500]


@pytest.mark.spark
def test_a_commit_decided_before_another_drivers_compaction_never_takes_a_number_it_freed(drivers, tmp_path):
    """Driver a decides a statement on the topic's first commit and holds it just before publishing commit 2. Driver
    b publishes commits 2 to 4, compacts 1-3 into one partition, and (the merged partitions' grace over: 2 s in
    these drivers) drops partitions 1 and 2, so no partition has the number 2 any more. Were a to register it now,
    its entries would sit in a partition the merged one covers, and the next compaction would drop them: a looks at
    the topic again before it publishes on a state that old, and decides again."""
    a, b = drivers(2)
    until = tmp_path / "until"
    a.tell(freed="hold", rows=[["a", 0], ["a", 1]], until=str(until))
    holding = a.answer()["holding"]
    assert b.ask(freed="race", rows=[["b", 0], ["b", 1], ["b", 2]])["raced"] == [holding, holding + 1, holding + 2]
    until.touch()
    written, duplicates, conflicts = a.answer()["held"]
    assert (written, duplicates) == (2, 0)
    b.ask(freed="race", rows=[])            # another compaction, after the grace
    assert [tuple(e) for e in b.ask(freed="entries")["entries"]] == [("a", 0), ("a", 1), ("b", 0), ("b", 1),
                                                                     ("b", 2)]
    assert conflicts >= 1


@pytest.mark.spark
def test_a_driver_catches_up_over_another_drivers_retry_and_policy_change(drivers):
    """Another driver's retry of a batch already written (every entry dropped) and its change of a policy are
    commits with no entry: a driver catches up over them, where it recovered the state whole, and its next statement
    follows the new policy."""
    a, b = drivers(2)
    batch = [["p", 0], ["p", 1]]
    assert a.ask(retried="send", rows=batch) == {"sent": [2, 0]}
    assert b.ask(retried="send", rows=batch) == {"sent": [0, 2]}       # the retry, in a commit of its own
    b.ask(retried="gaps", policy="refuse")
    seen = len(a.output())
    refused = a.ask(retried="send", rows=[["p", 5]])["refused"]          # ids 2 to 4 never sent: a hole, refused
    assert "gap" in refused, refused
    log = a.output()[seen:]
    assert "[default.retried] caught up over 2 commits of other drivers (0 entries, 0 producers, 2 with no entry)" \
        in log and "recover" not in log, log
    assert a.ask(retried="send", rows=[["p", 2]]) == {"sent": [1, 0]}


class Driver:
    """A driver process (driver.py) that opens, uses and closes producers when asked."""

    def __init__(self, home: str, *, metastore: str | None = None, remote: str | None = None):
        where = ["--metastore", metastore] if metastore else ["--remote", remote]
        self.log = tempfile.TemporaryFile("w+")     # a pipe left unread fills, and the driver blocks on its logging
        self.process = subprocess.Popen([sys.executable, str(DRIVER), home, str(LEASE), *where], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.me: dict = {}

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def answer(self, timeout: float = 300) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            self.log.seek(0)
            raise AssertionError(f"the driver gave no answer ({self.process.poll()}): {self.log.read()[-3000:]}")
        return line

    def output(self) -> str:
        """What the driver wrote on standard error so far (read at an offset: the file's position is the driver's
        too, where it writes next)."""
        fd = self.log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def ready(self) -> "Driver":
        self.me = self.answer()
        return self

    def tell(self, **command) -> None:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def ask(self, **command) -> dict:
        self.tell(**command)
        return self.answer()

    def named_in(self, message: str) -> bool:
        """Whether an error names this driver as a lease's holder: its host, process and Spark application."""
        return (f"host {self.me['host']}, process {self.me['ready']}, Spark application {self.me['application']}"
                in message)

    def kill(self) -> None:
        """kill -9, the Python driver and its JVM."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def expires_at(refusal: str) -> float:
    """When the lease a refusal names expires, as it says."""
    when = re.search(r"expires at (\S+ \S+) UTC", refusal)[1]
    return dt.datetime.strptime(when, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc).timestamp()


def opened(driver: Driver, name: str) -> tuple[int, int]:
    """Open ``name`` in ``driver``: the producer's last sequence id, and its lease's epoch."""
    answer = driver.ask(open=name)
    return answer["last"], answer["epoch"]


def open_once_expired(driver: Driver, name: str, holder: Driver) -> tuple[int, int]:
    """Open ``name`` in ``driver`` until it is opened: refused, naming ``holder`` and the same expiry, before the
    holder's lease expires, and claimed once it has (the holder renews it no more), not before; ``opened``'s answer."""
    answer = driver.ask(open=name)
    assert holder.named_in(answer["refused"]), answer
    expiry = expires_at(answer["refused"])
    assert answer["at"] < expiry
    while "refused" in answer:
        assert holder.named_in(answer["refused"]) and expires_at(answer["refused"]) == expiry, answer
        time.sleep(0.5)
        answer = driver.ask(open=name)
    assert expiry <= answer["claimed"] < expiry + LEASE, (answer, expiry)     # not before, and soon after
    return answer["last"], answer["epoch"]


def refused_by(driver: Driver, name: str, holder: Driver) -> str:
    """Open ``name`` in ``driver``: refused as already connected, naming ``holder``; the message."""
    refused = driver.ask(open=name)["refused"]
    assert f"{name!r} is already connected to topic default.r14" in refused and holder.named_in(refused), refused
    return refused


@pytest.mark.spark
def test_the_command_line_reaches_the_shared_metastore_from_a_home_of_its_own(metastore, tmp_path):
    """``seqdedup recover --metastore URL``: a command line on another home (another machine, as far as it can tell)
    sees the topic C17's drivers wrote, and its state checked against the log."""
    done = subprocess.run([sys.executable, "-m", "seqdedup", "recover", c17.TOPIC, "--metastore", metastore,
                           "-d", str(tmp_path / "home")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"default.{c17.TOPIC}: 5 producers recovered"), done.stdout
    assert "checked against a replay of" in done.stdout and ": matches" in done.stdout, done.stdout


@pytest.mark.spark
def test_r14_one_live_producer_per_name_across_drivers(drivers):
    """A second driver is refused a name another holds, until the holder closes it or its lease expires (killed,
    or paused: the paused one is then fenced). Epochs only grow: a late renewal may claim the next one itself."""
    a, b = drivers(2)       # (each creates the topic on its first open)
    try:
        # A holds n: B is refused, told when A's lease expires; another name does not interfere
        last, first = opened(a, "n")
        assert last == -1
        assert time.time() - 1 < expires_at(refused_by(b, "n", a)) <= time.time() + LEASE
        assert opened(b, "m")[0] == -1
        refused_by(a, "m", b)
        assert a.ask(send="n", rows=2) == {"sent": [[0, False], [1, False]]}
        # A closes n: B takes it at once, after A's mark
        assert a.ask(close="n") == {"closed": "n"}
        last, second = opened(b, "n")
        assert last == 1 and second > first
        # B pauses longer than its lease (SIGSTOP: it renews no more): A is refused until B's lease has expired, then
        # takes the name; B, resumed, is fenced: its send is refused, before it runs anything
        os.kill(b.process.pid, signal.SIGSTOP)     # (its JVM runs on: a call it has begun ends)
        try:
            last, third = open_once_expired(a, "n", b)
        finally:
            os.kill(b.process.pid, signal.SIGCONT)
        assert last == 1 and third > second
        fenced = b.ask(send="n", rows=1)["refused"]
        assert "'n' lost its name on topic default.r14" in fenced and a.named_in(fenced), fenced
        assert b.ask(close="n") == {"closed": "n"}
        # A is killed holding n (no close): B is refused until A's lease has expired, then takes the name
        a.kill()
        last, fourth = open_once_expired(b, "n", a)
        assert last == 1 and fourth > third
        assert b.ask(send="n", rows=1) == {"sent": [[2, False]]}
        entries = [(p, s, payload.split(":")[0]) for p, s, payload in b.ask(entries=True)["entries"]]
        pa, pb = str(a.me["ready"]), str(b.me["ready"])
        assert entries == [("n", 0, pa), ("n", 1, pa), ("n", 2, pb)]     # the fenced send wrote nothing
    finally:
        for driver in (a, b):
            driver.kill()


@pytest.mark.connect
def test_r14_one_live_producer_per_name_across_spark_connect_clients(tmp_path):
    """The leases are SQL only: two Spark Connect clients (no JVM of their own) of one server, in two processes.
    About 100 s on 2 cores (a server, a catalog made through it), so it runs with SEQDEDUP_CONNECT=all (conftest)."""
    from seqdedup.extensions.spark.connect_server import start_local_server

    server = start_local_server(tmp_path / "server")
    a, b = Driver(str(tmp_path), remote=server.url), Driver(str(tmp_path), remote=server.url)
    try:
        a.ready(), b.ready()
        last, first = opened(a, "n")
        refused_by(b, "n", a)
        assert a.ask(send="n", rows=1) == {"sent": [[0, False]]}
        assert a.ask(close="n") == {"closed": "n"}
        last, second = opened(b, "n")
        assert last == 0 and second > first
    finally:
        for driver in (a, b):
            driver.kill()
        server.stop()
