"""Turning deduplication off forgets every producer's mark (R10, as in Pulsar): kept, but made deliberate. The command
line refuses it without --yes, saying what would be forgotten; Python and SQL warn once per call that turns it off on
a topic (and never where nothing is turned off)."""
from __future__ import annotations

import json
import warnings

from seqdedup.errors import SeqdedupWarning

from . import test_cli_ux
from .test_cli_ux import lines, one_line_error

run = test_cli_ux.run          # the fixture: a command run in process, in a folder of its own


def warned(call) -> list[str]:
    """The SeqdedupWarnings ``call()`` gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, SeqdedupWarning)]


def test_python_and_sql_warn_once_where_a_change_turns_deduplication_off(dedup):
    session, events = dedup.session, dedup.key("events")
    dedup.topic("events")
    dedup.topic("other")
    dedup.send([("p", 0), ("p", 1), ("q", 5)])
    dedup.send([("r", 2)], topic="other")
    assert warned(lambda: session.alter_topic("events", snapshot_interval_entries=5)) == []
    turned_off = warned(lambda: session.alter_topic("events", deduplication_enabled=False))
    assert len(turned_off) == 1 and f"deduplication is off now on {events} (2 producers' marks)" in turned_off[0]
    assert "R10" in turned_off[0] and "a retry is written twice" in turned_off[0]
    assert warned(lambda: session.alter_topic("events", deduplication_enabled=False)) == []     # off already
    assert warned(lambda: session.alter_topic("events", deduplication_enabled=True)) == []
    dedup.send([("p", 0)])
    # a namespace (or global) setting turns off only the topics that set none of their own; unsetting a topic's own
    # value turns it off where the namespace's applies then
    off = warned(lambda: session.set_namespace_policy(dedup.namespace, deduplication_enabled=False))
    assert off == [off[0]] and f"on {dedup.key('other')} (1 producer's mark):" in off[0], off
    assert warned(lambda: session.alter_topic("events", deduplication_enabled=None)) == [
        off[0].replace(f"{dedup.key('other')} (1 producer's mark)", f"{events} (1 producer's mark)")]
    for text in ("SET seqdedup.deduplication_enabled = true",
                 f"ALTER DATABASE {dedup.namespace} SET DBPROPERTIES ('seqdedup.deduplication_enabled' = 'true')"):
        assert warned(lambda: session.sql(text)) == []
    assert warned(lambda: session.sql("SET seqdedup.deduplication_enabled = false")) == []      # the namespace's wins
    sql = warned(lambda: session.sql("ALTER TABLE events SET TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'false')"))
    assert len(sql) == 1 and f"on {events} (no marks yet):" in sql[0]
    assert session.last_sequence_id("events", "p") == -1 and session.last_sequence_id("other", "r") == -1


def test_the_command_line_asks_for_yes_before_it_forgets_marks(run, tmp_path):
    """The issue's run: alter =false, =true, then the same ingest wrote its 7 entries twice, without a word."""
    run("topic", "create", "events", "-c", "payload:STRING")
    (tmp_path / "in.jsonl").write_bytes(lines([{"producer": f"p{s % 3}", "seq": s, "payload": "x"} for s in range(7)]))
    ingest = ["ingest", "events", "in.jsonl", "--producer-column", "producer", "--sequence-column", "seq", "--json"]
    assert json.loads(run(*ingest)[1])["written"] == 7
    off = ["topic", "alter", "events", "-p", "deduplication_enabled=false"]
    one_line_error(run(*off), "turns deduplication off on main.events (3 producers' marks)", "R10",
                   "Nothing was changed", "seqdedup topic alter events -p deduplication_enabled=false --yes")
    assert json.loads(run(*ingest)[1])["written"] == 0                  # nothing was forgotten
    status, out, err = run(*off, "--yes")
    assert status == 0 and err == "" and out.startswith(
        "deduplication is off now on main.events (3 producers' marks): those marks are forgotten (R10)\n")
    assert "deduplication_enabled = false  (topic)" in out
    assert run("topic", "alter", "events", "-p", "deduplication_enabled=false")[0] == 0     # nothing left to forget
    assert run("topic", "alter", "events", "-p", "deduplication_enabled=true")[0] == 0
    assert json.loads(run(*ingest)[1])["written"] == 7                  # R10, as documented: asked for
    # the namespace and global setters ask the same, for the topics they turn off
    assert run("global", "alter", "-p", "deduplication_enabled=false")[0] == 0      # the topic's own value wins
    assert run("namespace", "alter", "main", "-p", "deduplication_enabled=false")[0] == 0
    one_line_error(run("topic", "alter", "events", "-p", "deduplication_enabled="), "main.events (3 producers' marks)",
                   "add --yes")
    for unset in (["namespace", "alter", "main"], ["global", "alter"], ["topic", "alter", "events"]):
        assert run(*unset, "-p", "deduplication_enabled=")[0] == 0       # on by default: nothing turned off
    one_line_error(run("global", "alter", "-p", "deduplication_enabled=false"), "main.events (3 producers' marks)",
                   "seqdedup global alter -p deduplication_enabled=false --yes")
    status, out, _ = run("global", "alter", "-p", "deduplication_enabled=false", "--yes", "--json")
    assert status == 0 and json.loads(out)["forgotten"] == {"main.events": 3}
    # a statement through `seqdedup sql` warns as Python does, in one line
    run("topic", "alter", "events", "-p", "deduplication_enabled=true")
    status, _, err = run("sql", "ALTER TABLE events SET TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'false')")
    assert status == 0 and err.startswith("seqdedup: warning: deduplication is off now on main.events (no marks yet)")
    assert len(err.strip().splitlines()) == 1
