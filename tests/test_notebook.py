"""``%load_ext seqdedup`` and ``%%seqdedup`` cells in a real Jupyter kernel (seqdedup/notebook.py): a cell shows
what its statements did as a table, a seqdedup error fails the cell in one line, and a cell runs on the session
the notebook names (else on seqdedup.duckdb, with a note).

The tests start an IPython kernel (this Python, the working tree's seqdedup) with jupyter_client, as a notebook
frontend does, and read the messages the kernel sends back. DuckDB only: a kernel on Spark would start a JVM of
its own next to the tests'; the magic hands a cell's text to ``Session.sql_all``, which the behaviour suite runs
on every engine.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a cell may take (a kernel's first import of seqdedup and DuckDB included), on a busy 2-core machine.
TIMEOUT = 120

TOPIC_AND_STAGING = """%%seqdedup
CREATE TABLE events (payload STRING) TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'true');
CREATE TEMPORARY VIEW staging AS SELECT * FROM VALUES ('p1', 0, 'a'), ('p1', 0, 'a'), ('p2', 5, 'b')
    AS t(producer, seq, payload)"""

INSERT = """%%seqdedup
INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq);"""


@dataclass
class Ran:
    """What the kernel sent back for one cell."""

    reply: dict           # the execute_reply's content: status, and ename, evalue and traceback on an error
    messages: list[dict]  # the cell's iopub messages: stream, execute_result, display_data, error

    def shown(self, mime: str) -> list[str]:
        """What the cell displayed as ``mime``: its value (Out[n]) and any display() calls, in order."""
        return [m["content"]["data"][mime] for m in self.messages
                if m["msg_type"] in ("execute_result", "display_data") and mime in m["content"]["data"]]

    def printed(self) -> str:
        return "".join(m["content"]["text"] for m in self.messages if m["msg_type"] == "stream")

    def errors(self) -> list[dict]:
        return [m["content"] for m in self.messages if m["msg_type"] == "error"]


class Kernel:
    def __init__(self, client):
        self.client = client
        self.folder = None        # the kernel's working folder, the test's own (see the notebook fixture)

    def run(self, code: str) -> Ran:
        messages = []
        reply = self.client.execute_interactive(code, output_hook=messages.append, timeout=TIMEOUT)
        return Ran(reply["content"], [m for m in messages if m["msg_type"] != "status"])

    def ok(self, code: str) -> Ran:
        ran = self.run(code)
        assert ran.reply["status"] == "ok", (code, ran.reply, ran.printed())
        return ran


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """An IPython kernel of this Python, with the extension loaded; one for the module (each start and first import
    of seqdedup costs seconds), which the notebook fixture resets for each test."""
    home = tmp_path_factory.mktemp("kernel")
    specs = home / "kernels"
    (specs / "seqdedup-tests").mkdir(parents=True)
    (specs / "seqdedup-tests" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "seqdedup tests", "language": "python"}))
    manager = KernelManager(kernel_name="seqdedup-tests", connection_file=str(home / "connection.json"),
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)]))
    # the working tree's seqdedup first; IPython's profile and history, and Jupyter's runtime files, in the test's
    # folder (not the user's home)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "IPYTHONDIR": str(home / "ipython"), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    manager.start_kernel(cwd=str(home), env=env)
    client = manager.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=TIMEOUT)
        running = Kernel(client)
        where = running.ok("import seqdedup; print(seqdedup.__file__)").printed().strip()
        assert Path(where).resolve() == ROOT / "seqdedup" / "__init__.py", where
        running.ok("%load_ext seqdedup")
        yield running
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@pytest.fixture
def notebook(kernel, tmp_path):
    """The kernel as a fresh notebook in ``tmp_path``: no session connected, no variables of an earlier test."""
    kernel.ok(f"%seqdedup close\n%reset -f\n__import__('os').chdir({str(tmp_path)!r})")
    kernel.folder = tmp_path
    return kernel


def _table(html: str) -> list[dict[str, str]]:
    """The rows of the HTML table a cell shows, each as column -> text."""
    rows = [re.findall(r"<t[hd]>(.*?)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", html)]
    return [dict(zip(rows[0], row)) for row in rows[1:]]


def test_a_cell_shows_what_its_insert_wrote_and_what_it_dropped_as_duplicates(notebook, tmp_path):
    database = tmp_path / "events.duckdb"
    assert str(database) in notebook.ok(f"%seqdedup connect {database}").printed()
    assert notebook.ok(TOPIC_AND_STAGING).shown("text/plain") == ["done (the statement returns no rows)"]

    first = notebook.ok(INSERT)     # (its closing ';' does not hide the cell's value, as it would in Python)
    [html] = first.shown("text/html")
    assert "main.events: wrote 2 entries, dropped 1 duplicate" in html
    assert {row["producer"]: (row["written"], row["duplicates"]) for row in _table(html)} == \
        {"p1": ("1", "1"), "p2": ("1", "0")}
    assert "main.events: wrote 2 entries, dropped 1 duplicate" in first.shown("text/plain")[0]   # (without HTML)

    again = notebook.ok(INSERT)       # a retry of the same entries: each is a duplicate now
    [html] = again.shown("text/html")
    assert "main.events: wrote 0 entries, dropped 3 duplicates" in html
    assert {row["producer"]: (row["written"], row["duplicates"]) for row in _table(html)} == \
        {"p1": ("0", "2"), "p2": ("0", "1")}
    # the cell's value is the StatementResult itself
    assert notebook.ok("_.written, _.duplicates, len(_.to_pandas())").shown("text/plain") == ["(0, 3, 2)"]


def test_a_seqdedup_error_fails_the_cell_with_its_message_on_one_line(notebook):
    notebook.ok("%seqdedup connect :memory:")
    failed = notebook.run("%%seqdedup\nINSERT INTO nowhere SELECT 'x' WHERE is_not_dup('p1', 0)")

    assert failed.reply["status"] == "error"          # so "Run all" stops at this cell
    assert failed.reply["ename"] == "TopicError"
    assert failed.reply["evalue"].startswith("unknown topic main.nowhere; create it first")
    [error] = failed.errors()
    assert error["traceback"] == [f"TopicError: {failed.reply['evalue']}"]    # no traceback of seqdedup's frames


def test_a_cell_runs_on_the_session_in_the_variable_it_names(notebook):
    notebook.ok("import seqdedup\nmine = seqdedup.connect(':memory:')\n"
                "_ = mine.create_topic('events', {'payload': 'STRING'})\nnumber = 3")

    ran = notebook.ok("%%seqdedup mine\nSELECT last_sequence_id('events', 'p1') AS mark")
    assert _table(ran.shown("text/html")[0]) == [{"mark": "-1"}]

    unknown = notebook.run("%%seqdedup theirs\nSELECT 1")
    assert (unknown.reply["status"], unknown.reply["ename"]) == ("error", "UsageError")
    assert "the notebook has no variable 'theirs'" in unknown.reply["evalue"]
    other = notebook.run("%%seqdedup number\nSELECT 1")
    assert other.reply["evalue"] == "number holds an object of type int, not a seqdedup Session or a SparkSession"
    assert not (notebook.folder / "seqdedup.duckdb").exists()


def test_a_cell_that_names_no_session_runs_on_seqdedup_duckdb_in_the_working_folder_and_says_so(notebook):
    ran = notebook.ok("%%seqdedup\nSELECT 1 AS one")

    assert ran.printed().startswith("seqdedup: no session named")
    assert f"cells run on the DuckDB database {notebook.folder / 'seqdedup.duckdb'}" in ran.printed()
    assert _table(ran.shown("text/html")[0]) == [{"one": "1"}]
    assert (notebook.folder / "seqdedup.duckdb").exists()
    assert "no session named" not in notebook.ok("%%seqdedup\nSELECT 2 AS two").printed()    # said once


def test_the_notebook_guide_runs_as_written(notebook):
    """docs/guides/notebook.md's cells, in order, each show the text that follows it there (its error line, for the
    cell that fails); the cells after its first heading are not run (Spark)."""
    text = (ROOT / "docs" / "guides" / "notebook.md").read_text().split("\n## ")[0]
    blocks = re.findall(r"```(python|text)\n(.*?)```", text, re.S)
    cells = [(code, said if following == "text" else None) for (kind, code), (following, said)
             in zip(blocks, blocks[1:] + [("", "")]) if kind == "python"]
    assert len(cells) >= 5
    for code, said in cells:
        ran = notebook.run(code)
        if ran.reply["status"] == "error":
            assert said is not None and [said.strip()] == ran.errors()[0]["traceback"], (code, ran.reply)
        else:
            assert said is None or [said.strip()] == ran.shown("text/plain"), (code, ran.shown("text/plain"))
