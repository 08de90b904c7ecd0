"""The process test_read_only_files.py runs: a database whose files this process may not write.

    python read_only_child.py ENGINE DATABASE

DATABASE is a DuckDB file, or a Spark home (warehouse and metastore). The child writes a topic, then for each way
its files can be read-only (DuckDB: the file mode 0444, the folder 0555; Spark: the warehouse folder, every folder
and file in it) tries every read and write, gives the files their modes back, and checks that the data is intact
and that a retry writes each entry once. It prints one JSON line per way, and one at the start that says how.

Root passes every permission check, so a child started as root first gives up CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (for itself and its children, the Spark JVM included) and runs again: then file modes bind it as
they bind any user. It checks that they do before it trusts a result ("probe").
"""
from __future__ import annotations

import ctypes
import json
import os
import stat
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
DROPPED = "SEQDEDUP_FAULTS_DAC_DROPPED"


def give_up_root_permissions() -> str:
    """How this process is bound by file modes (re-executes itself once when it runs as root)."""
    if os.geteuid() != 0:
        return f"chmod, as uid {os.geteuid()}"
    if not os.environ.get(DROPPED):
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                return f"chmod, as root: dropping capability {cap} failed: {os.strerror(ctypes.get_errno())}"
        os.environ[DROPPED] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    return "chmod, as root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH"


def read_only(path: Path, writable: bool, *, recursive: bool) -> None:
    """Take write permission away from ``path`` (and, ``recursive``, everything under it), or give it back."""
    for p in [path, *path.rglob("*")] if recursive else [path]:
        mode = stat.S_IMODE(p.stat().st_mode)
        p.chmod(mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def probe(path: Path) -> str:
    """'denied' when this process really cannot write at ``path``."""
    try:
        if path.is_dir():
            (path / "probe").touch()
            (path / "probe").unlink()
        else:
            open(path, "r+b").close()
        return "allowed"
    except PermissionError:
        return "denied"


def attempt(action) -> str:
    try:
        action()
        return "ok"
    except Exception as error:    # the test judges the type and the text
        return f"{type(error).__name__}: {error}"


def main() -> None:
    how = give_up_root_permissions()
    import seqdedup
    from tests.faults.helpers import STATEMENT, dump, entries, rows, stage

    engine, database = sys.argv[1], Path(sys.argv[2])
    if engine == "spark":
        from seqdedup.extensions.spark import local_session

        target = local_session(database)
        ways = {"warehouse": (database / "warehouse", True)}    # with every table's folder and file in it
    else:
        target = str(database)
        ways = {"file": (database, False), "folder": (database.parent, False)}

    def connect(**options):
        return seqdedup.connect(target, engine=engine, **options)

    def send(session, ids):
        stage(session, engine, rows(2, ids))
        return session.sql(STATEMENT).written

    session = connect()
    session.create_topic("events", {"payload": "STRING"}, snapshot_interval_entries=1000)
    send(session, range(2))
    print(json.dumps({"how": how}), flush=True)

    for i, (way, (path, recursive)) in enumerate(ways.items()):
        before = dump(session)
        session.close()
        report: dict = {"way": way}
        read_only(path, writable=False, recursive=recursive)
        report["probe"] = probe(path)
        try:
            session = connect()
        except Exception as error:                 # refused at once: the reads go through a read-only session
            report["connect"] = f"{type(error).__name__}: {error}"
            session = connect(read_only=True)
        report["reads"] = {"last_sequence_id": session.last_sequence_id("events", "p0"),
                           "producer_state": [[p, s] for p, s, _ in session.producer_state("events").rows],
                           "select": session.sql("SELECT count(*) FROM events").rows[0][0]}
        new = range(i + 1, i + 3)                  # one id the topic holds, one new, per producer
        report["writes"] = {
            "a dedup INSERT": attempt(lambda: send(session, new)),
            "create_topic": attempt(lambda: session.create_topic(f"other_{way}", {"payload": "STRING"})),
            "alter_topic": attempt(lambda: session.alter_topic("events", snapshot_interval_entries=5)),
            "snapshot": attempt(lambda: session.snapshot("events")),
        }
        session.close()
        read_only(path, writable=True, recursive=recursive)

        session = connect()
        report["intact"] = dump(session) == before
        report["retry_written"] = send(session, new)
        report["entries"] = [list(e) for e in entries(session)]
        report["create_topic_after"] = attempt(lambda: session.create_topic(f"other_{way}", {"payload": "STRING"}))
        print(json.dumps(report), flush=True)
    session.close()


if __name__ == "__main__":
    main()
