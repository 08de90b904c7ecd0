"""The command line on a running Spark Connect server, as Pulsar's admin tool talks to a running broker: the server
started the documented way (``seqdedup connect-server``), then commands with ``--remote`` or SEQDEDUP_REMOTE, none
starting a JVM of its own. One server (a JVM) for the module: it runs in every CI run (connect_ci), once."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from seqdedup.cli import main


def command(*args: str, cwd, env=None, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "seqdedup", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})
    assert not check or done.returncode == 0, done.stderr
    return done


@pytest.mark.connect
@pytest.mark.connect_ci
def test_commands_run_on_a_spark_connect_server_started_by_the_command_line(tmp_path, monkeypatch, capsys):
    home = tmp_path / "spark home"
    server = subprocess.Popen([sys.executable, "-m", "seqdedup", "connect-server", "-d", str(home), "--port", "0"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = server.stdout.readline()         # (the command gives up by itself if the server does not start)
        found = re.search(r"ready at (sc://127\.0\.0\.1:(\d+)) ", ready)
        assert found, ready + server.stderr.read()
        url, port = found.group(1), int(found.group(2))
        assert f"export SEQDEDUP_REMOTE={url}" in server.stdout.readline()

        # a process of its own, as a user runs it: no JVM of its own, so seconds rather than the minute a local
        # session takes to start (benchmarks/cli_remote.py measures it)
        created = command("topic", "create", "events", "-c", "payload:STRING", cwd=tmp_path,
                          env={"SEQDEDUP_REMOTE": url})
        assert "topic default.events" in created.stdout

        monkeypatch.chdir(tmp_path)

        def run(*args: str):
            status = main([*args, "--remote", url])
            out, err = capsys.readouterr()
            assert status == 0, err
            return out

        (tmp_path / "in.jsonl").write_text("".join(json.dumps({"producer": "p", "seq": s, "payload": "x"}) + "\n"
                                                   for s in (0, 1, 1, 2)))
        # a relative path is the client's: the server, in its own folder, reads it where the client has it
        ingested = json.loads(run("ingest", "events", "in.jsonl", "--producer-column", "producer",
                                  "--sequence-column", "seq", "--json"))
        assert (ingested["written"], ingested["duplicates"]) == (3, 1)
        # the server holds its home: a local session on it is refused at once, where embedded Derby would hang
        assert main(["topic", "list", "--engine", "spark", "-d", str(home), "--lock-timeout", "0"]) == 1
        assert f"is in use by process {server.pid}" in capsys.readouterr().err
    finally:
        server.send_signal(signal.SIGTERM)       # as Ctrl-C: the command stops its server, then exits
        assert server.wait(timeout=120) == 0
    deadline = time.monotonic() + 30
    with socket.socket() as probe:              # the server is gone with it
        while probe.connect_ex(("127.0.0.1", port)) == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert time.monotonic() < deadline
