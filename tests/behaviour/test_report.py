"""``Session.report`` (``seqdedup report TOPIC``): what a topic's statements dropped and why, per commit and per
producer, summed by the engine from the run log, the ledger of dropped entries (R16) and the holes (R17); the page
carries the same figures as JSON. The page in a real browser: tests/test_report_page.py."""
from __future__ import annotations

import collections
import json
import re

import pytest

from seqdedup import TopicError
from seqdedup.core.drops import DropReport
from seqdedup.report import page
from seqdedup.udfs import REASONS

#: Statements with every reason and holes: (producer, seq[, highest[, payload]]) in arrival order; the second runs
#: while the topic keeps no ledger (its drops are "unexplained" in the report).
STATEMENTS = [
    [("p", 0), ("p", 1), ("q", 5)],
    [("p", 1), ("q", 5), ("q", 6)],                                        # counts only: 2 drops, no ledger row
    [("p", 1), ("p", 4), ("p", 4), ("p", 3), ("q", 2, 8), ("q", 9), ("r", 0)],  # retry, repeat, late, straddle; holes
    [("p", 9), ("r", 0), ("r", 0), ("p", 4, None, "other")],             # a hole; two retries of r; a conflict
]


def page_data(report: DropReport) -> dict:
    """The figures the page carries, as a tool reading it gets them."""
    found = re.search(r'<script type="application/json" id="seqdedup-report">(.*?)</script>', page(report), re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_the_report_sums_the_run_log_the_ledger_and_the_holes(dedup):
    dedup.topic(dropped_entries="keys", gap_policy="record")
    results = []
    for number, rows in enumerate(STATEMENTS):
        if number in (1, 2):
            dedup.session.alter_topic("events", dropped_entries="counts" if number == 1 else "keys")
        results.append(dedup.send(rows))
    report = dedup.session.report("events")

    ledger = dedup.session.dropped("events")
    reasons = collections.Counter((row[ledger.columns.index("producer")], row[ledger.columns.index("reason")])
                                  for row in ledger.rows)
    holes = dedup.session.gaps("events")
    after, before = holes.columns.index("after_id"), holes.columns.index("before_id")
    skipped = collections.Counter()
    for row in holes.rows:
        skipped[row[holes.columns.index("producer")]] += row[before] - row[after] - 1
    for row in report.producers.to_pylist():
        producer = row["producer"]
        assert row["written"] == sum(c.written for r in results for c in r.producers if c.producer == producer)
        assert row["dropped"] == sum(c.duplicates for r in results for c in r.producers if c.producer == producer)
        assert {reason: row[reason] for reason in REASONS} == {reason: reasons[(producer, reason)]
                                                               for reason in REASONS}, producer
        assert row["unexplained"] == row["dropped"] - sum(row[reason] for reason in REASONS)
        assert row["skipped_ids"] == skipped[producer]
    totals = report.totals()
    assert (totals["written"], totals["dropped"], totals["unexplained"]) == (
        sum(r.written for r in results), sum(r.duplicates for r in results), results[1].duplicates)
    assert totals["unexplained"] == 2 and all(totals[reason] for reason in REASONS)
    assert totals["holes"] == len(holes.rows) == 3
    assert [row["producer"] for row in report.producers.to_pylist()][0] == "p"       # the most dropping first
    assert [row["dropped"] for row in report.commits.to_pylist()] == [r.duplicates for r in results]
    over_commits = collections.Counter()
    for row in report.producers_over_commits.to_pylist():
        for figure in DropReport.FIGURES:
            over_commits[(row["producer"], figure)] += row[figure]
    assert over_commits == collections.Counter({(row["producer"], figure): row[figure]
                                                for row in report.producers.to_pylist()
                                                for figure in DropReport.FIGURES if row[figure]})

    assert page_data(report) == json.loads(json.dumps(report.to_dict()))
    last = dedup.session.report("events", commits=1)
    assert [row["dropped"] for row in last.commits.to_pylist()] == [results[-1].duplicates]
    assert {row["producer"]: row["dropped"] for row in last.producers.to_pylist()} == {"p": 1, "r": 2}
    with pytest.raises(TopicError, match="commits=0: give the number of latest commits"):
        dedup.session.report("events", commits=0)


def test_a_report_of_a_topic_without_statements_is_empty(dedup):
    dedup.topic()
    report = dedup.session.report("events")
    assert report.commits.num_rows == report.producers.num_rows == 0
    assert set(report.totals().values()) == {0}
    assert "No statement of this topic is in its run log" in page(report)
