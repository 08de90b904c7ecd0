"""``seqdedup report TOPIC``, as a user meets it: the command writes one self-contained page, and a real headless
browser (Debian's chromium, driven by Playwright; ``./dev test`` installs chromium where it is missing) opens it
with no error in its console and draws its charts. ``SEQDEDUP_UPDATE_PICTURES=1`` also keeps the screenshot as the
guide's picture (docs/guides/report.png). The figures themselves: tests/behaviour/test_report.py."""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import seqdedup

from .test_cli import seqdedup as run_cli

GUIDE_PICTURE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "report.png"


def incident(database: Path) -> None:
    """A topic after a bad hour: four producers, retries after timeouts, repeats, late entries, batch entries
    straddling the mark, and skipped ids; the ledger and the holes kept."""
    draw = random.Random(20261130)
    s = seqdedup.connect(str(database))
    s.create_topic("events", {"payload": "STRING"}, dropped_entries="keys", gap_policy="record")
    marks = {name: 0 for name in ("orders-1", "orders-2", "billing", "audit")}
    for statement in range(16):
        rows = []
        for producer, mark in marks.items():
            for _ in range(draw.randint(3, 12)):
                seq = mark + draw.choice([-2, -1, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 8]) + (statement % 5 == 4)
                rows.append((producer, max(seq, 0), seq + 3 if draw.random() < 0.1 else None))
            marks[producer] = max(mark, *(r[1] for r in rows if r[0] == producer))
        draw.shuffle(rows)
        values = ", ".join(f"('{p}', {s}, {'NULL' if h is None else h}, {i})" for i, (p, s, h) in enumerate(rows))
        s.sql(f"CREATE OR REPLACE TEMPORARY VIEW staging AS SELECT * FROM VALUES {values} "
              "AS t(producer, seq, highest, arrival)")
        s.sql("INSERT INTO events SELECT concat(producer, '/', seq) AS payload FROM staging "
              "WHERE is_not_dup(producer, seq, highest) ORDER BY arrival")
    s.close()


def test_the_report_page_opens_in_a_real_browser_with_its_charts_and_no_error(tmp_path):
    from playwright.sync_api import sync_playwright

    incident(tmp_path / "seqdedup.duckdb")
    printed = run_cli("report", "events", "--out", "page.html", cwd=tmp_path).stdout
    assert printed.startswith("page.html: main.events, 16 commits: wrote ") and "holes" in printed
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser_path, "no chromium on this machine: ./dev test installs Debian's package"
    messages = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("console", lambda message: messages.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: messages.append(f"page error: {error}"))
            page.on("requestfailed", lambda request: messages.append(f"request failed: {request.url}"))
            page.goto((tmp_path / "page.html").as_uri())
            assert page.title() == "seqdedup report: main.events"
            assert page.locator("h1").inner_text() == "What main.events dropped, and why"
            charts = page.locator("figure svg")
            assert charts.count() == 4              # per commit, per producer, producers per commit, the holes
            assert all(charts.nth(i).bounding_box()["height"] > 100 for i in range(4))
            page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        finally:
            browser.close()
    assert messages == []
    assert (tmp_path / "page.png").stat().st_size > 20_000
    if os.environ.get("SEQDEDUP_UPDATE_PICTURES"):
        shutil.copyfile(tmp_path / "page.png", GUIDE_PICTURE)
