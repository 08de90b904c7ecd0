"""Policies from the command line, as a pulsar-admin user sets them: on a topic, a namespace or globally, each command
that sets them listing every policy the code knows (catalog/policies.py), and every command's options explained."""
from __future__ import annotations

import argparse
import json

import pytest

from seqdedup.catalog.policies import DEFINITIONS, spelled
from seqdedup.cli import parser
from seqdedup.udfs import Policies

from . import test_cli_ux
from .test_cli_ux import one_line_error

run = test_cli_ux.run          # the fixture: a command run in process, in a folder of its own


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command of the command line, by name."""
    return next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


def flat(text: str) -> str:
    return " ".join(text.split())


def test_every_command_explains_each_option_and_those_that_set_policies_list_every_policy(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    setters = set()
    for name, command in commands().items():
        status, out, _ = run(name, "--help")
        assert status == 0 and out.startswith("usage: seqdedup " + name), out
        unexplained = [a.dest for a in command._actions if not a.help and a.dest != "help"]
        assert not unexplained, f"seqdedup {name}: options without help: {unexplained}"
        if any(a.dest == "policy" for a in command._actions):
            setters.add(name)
            defaults = Policies()
            for policy, definition in DEFINITIONS.items():
                assert flat(f"{policy} {definition.help}; default {spelled(policy, getattr(defaults, policy))}") \
                    in flat(out), f"seqdedup {name} --help lacks {policy}"
    assert setters == {"topic", "namespace", "global"}


def test_namespace_and_global_policies_are_set_from_the_command_line(run):
    run("topic", "create", "events", "-c", "payload:STRING")
    run("topic", "create", "own", "-c", "payload:STRING", "-p", "snapshot_interval_entries=2")
    status, out, _ = run("namespace", "alter", "main", "-p", "snapshot_interval_entries=5", "-p",
                         "producer_inactivity_timeout=never")
    assert status == 0 and out.splitlines() == [
        "namespace main: snapshot_interval_entries = 5, producer_inactivity_timeout = never",
        "  main.events: snapshot_interval_entries = 5 (namespace), producer_inactivity_timeout = never (namespace)",
        "  main.own: snapshot_interval_entries = 2 (topic), producer_inactivity_timeout = never (namespace)"]
    assert "snapshot_interval_entries = 5  (namespace)" in run("topic", "show", "events")[1]
    shown = json.loads(run("global", "alter", "-p", "snapshot_interval_entries=9", "--json")[1])
    assert shown["scope"] == "global" and shown["set"] == {"snapshot_interval_entries": "9"}
    assert shown["topics"]["main.events"]["snapshot_interval_entries"] == {"value": "5", "set_at": "namespace"}
    status, out, _ = run("namespace", "alter", "main", "-p", "snapshot_interval_entries=")
    assert status == 0 and "main.events: snapshot_interval_entries = 9 (global)" in out
    assert run("global", "alter", "-p", "snapshot_interval_entries=")[1].splitlines()[1] == \
        "  main.events: snapshot_interval_entries = 1000 (default)"
    status, out, _ = run("namespace", "alter", "elsewhere", "-p", "snapshot_interval_entries=3")
    assert status == 0 and "no topic here yet" in out
    one_line_error(run("namespace", "alter", "main", "-p", "snapshot_interval_entries=0"),
                   "bad value '0' for policy snapshot_interval_entries")
    one_line_error(run("global", "alter", "-p", "dedup=true"), "unknown policy 'dedup'", "deduplication_enabled")
    one_line_error(run("global", "alter", "-p", "snapshot_interval_entries"), "key=value")


@pytest.mark.parametrize("args, message", [
    (["--remote", "sc://127.0.0.1:1"], "no Spark Connect server answers at sc://127.0.0.1:1"),
    (["--remote", "127.0.0.1:15002"], "is not a Spark Connect URL: write sc://HOST:PORT"),
    (["--remote", "sc://127.0.0.1:1", "--database", "x"], "--database does not go with --remote"),
    (["--remote", "sc://127.0.0.1:1", "--engine", "duckdb"], "--engine duckdb does not go with"),
    (["--metastore", "thrift://127.0.0.1:1", "--engine", "duckdb"], "--metastore does not go with --engine duckdb"),
    (["--metastore", "thrift://127.0.0.1:1", "--remote", "sc://127.0.0.1:1"], "--metastore does not go with --remote"),
    (["--metastore", "mysql://127.0.0.1/hive"], "unknown metastore 'mysql://127.0.0.1/hive'"),
])
def test_remote_mistakes_are_one_clear_line_at_once(run, args, message):
    one_line_error(run("topic", "list", *args), message)


def test_the_remote_variable_stands_for_remote_unless_the_command_line_says_duckdb(run, monkeypatch):
    monkeypatch.setenv("SEQDEDUP_REMOTE", "sc://127.0.0.1:1")
    one_line_error(run("topic", "list"), "no Spark Connect server answers at sc://127.0.0.1:1")
    one_line_error(run("topic", "list", "-d", "x.duckdb"), "--database does not go with SEQDEDUP_REMOTE=sc://127.0.0.1:1",
                   "or unset SEQDEDUP_REMOTE")
    assert run("topic", "list", "--engine", "duckdb")[1].startswith("no topics yet")


def test_the_metastore_variable_stands_for_metastore_unless_the_command_line_says_otherwise(run, monkeypatch, tmp_path):
    """SEQDEDUP_METASTORE is read as --metastore would be (a bad URL is refused before a JVM starts, and leaves no
    Spark home behind); --engine duckdb and --remote win over it, and beside SEQDEDUP_REMOTE it is ambiguous."""
    monkeypatch.setenv("SEQDEDUP_METASTORE", "mysql://127.0.0.1/hive")
    one_line_error(run("topic", "list"), "unknown metastore 'mysql://127.0.0.1/hive'")
    assert not (tmp_path / "seqdedup-spark").exists()
    assert run("topic", "list", "--engine", "duckdb")[1].startswith("no topics yet")
    one_line_error(run("topic", "list", "--remote", "sc://127.0.0.1:1"), "no Spark Connect server answers")
    monkeypatch.setenv("SEQDEDUP_REMOTE", "sc://127.0.0.1:1")
    one_line_error(run("topic", "list"), "both SEQDEDUP_METASTORE and SEQDEDUP_REMOTE are set")
