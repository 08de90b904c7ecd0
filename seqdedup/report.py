"""The report page (``seqdedup report TOPIC``; ``page(session.report(topic))``): one self-contained HTML file, the page
a person opens after an incident. Its charts are drawn by matplotlib as SVG inside the page (no script, nothing
fetched), and its figures are in the page as JSON (``<script type="application/json" id="seqdedup-report">``) for
tools. The figures: seqdedup/core/drops.py."""
from __future__ import annotations

import datetime as dt
import html
import io
import json

from seqdedup.errors import SeqdedupError
from seqdedup.udfs import REASONS

from .core.drops import DropReport

#: How each figure is drawn: its label and colour (the reasons in the order of udfs.REASONS).
SERIES = {
    "written": ("written", "#4c9a2a"),
    "retry": ("retry (at or below the mark)", "#3b75af"),
    "straddles_mark": ("batch entry straddling the mark", "#ef8636"),
    "repeat": ("repeat within the statement", "#8d69b8"),
    "late": ("late (after a higher id)", "#c53a32"),
    "conflict": ("payload conflict (its id held with another payload)", "#d4a017"),
    "unexplained": ("dropped, no ledger row kept", "#9a9a9a"),
}
DROPS = (*REASONS, "unexplained")     # (each drawn dropped figure of DropReport.FIGURES)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1.5em; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { padding: 0.25em 0.7em; text-align: right; }
th { border-bottom: 1px solid #999; } td:first-child, th:first-child { text-align: left; }
.note { color: #555; font-size: 0.9em; } figure { margin: 1em 0; } svg { max-width: 100%; height: auto; }
"""


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")            # (no display: the charts are written, not shown)
        import matplotlib.pyplot as plt
    except ImportError:
        raise SeqdedupError("the report draws its charts with matplotlib, which is not installed: "
                            "pip install 'seqdedup[report]'") from None
    return plt


def _commit_axis(axes) -> None:
    from matplotlib.ticker import MaxNLocator

    axes.set_xlabel("commit")
    for axis in (axes.xaxis, axes.yaxis):       # (commits and entries are whole numbers)
        axis.set_major_locator(MaxNLocator(integer=True))


def _svg(figure) -> str:
    """A figure as inline SVG (its XML header left out: it sits inside the page)."""
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight")
    _pyplot().close(figure)
    text = out.getvalue()
    return text[text.index("<svg"):]


def _stacked(axes, positions, columns: dict[str, list[int]], names, *, horizontal: bool = False) -> None:
    base = [0] * len(positions)
    for name in names:
        label, colour = SERIES[name]
        values = columns[name]
        if not any(values):
            continue
        draw = axes.barh if horizontal else axes.bar
        draw(positions, values, 0.8, base, label=label, color=colour)
        base = [b + v for b, v in zip(base, values)]


def _commits_chart(report: DropReport) -> str:
    plt = _pyplot()
    columns = report.commits.to_pydict()
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True, height_ratios=[1, 1])
    commits = columns["commit_id"]
    _stacked(top, commits, columns, ["written"])
    top.set_ylabel("entries written")
    _stacked(bottom, commits, columns, DROPS)
    bottom.set_ylabel("entries dropped")
    _commit_axis(bottom)
    for axes in (top, bottom):
        axes.grid(axis="y", alpha=0.3)
    handles = [h for axes in (top, bottom) for h in axes.get_legend_handles_labels()[0]]
    labels = [label for axes in (top, bottom) for label in axes.get_legend_handles_labels()[1]]
    if handles:
        figure.legend(handles, labels, loc="upper center", ncol=3, frameon=False, bbox_to_anchor=(0.5, 1.06))
    return _svg(figure)


def _producers_chart(report: DropReport) -> str:
    plt = _pyplot()
    columns = report.producers.to_pydict()
    names = columns["producer"][::-1]           # (the most dropping at the top)
    flipped = {name: columns[name][::-1] for name in DROPS}
    figure, axes = plt.subplots(figsize=(10, 0.4 * len(names) + 1.2))
    _stacked(axes, range(len(names)), flipped, DROPS, horizontal=True)
    axes.set_yticks(range(len(names)), names)
    axes.set_xlabel("entries dropped")
    axes.grid(axis="x", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(frameon=False, loc="upper center", ncol=3, bbox_to_anchor=(0.5, -0.5 / len(names) - 0.2))
    return _svg(figure)


def _producers_over_commits_chart(report: DropReport) -> str:
    """A row per drawn producer: its drops per commit by reason, and what it wrote (a line)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    rows = report.producers_over_commits.to_pylist()
    drawn = {row["producer"] for row in rows}
    names = [name for name in report.producers.column("producer").to_pylist() if name in drawn]   # (most first)
    figure, grid = plt.subplots(len(names), 1, figsize=(10, 1.6 * len(names) + 0.8), sharex=True, squeeze=False)
    for axes, name in zip(grid[:, 0], names):
        mine = [row for row in rows if row["producer"] == name]
        commits = [row["commit_id"] for row in mine]
        _stacked(axes, commits, {key: [row[key] for row in mine] for key in DROPS}, DROPS)
        axes.plot(commits, [row["written"] for row in mine], color=SERIES["written"][1], marker=".",
                  label=SERIES["written"][0])
        axes.set_ylabel(name, rotation=0, ha="right", va="center")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(axis="y", alpha=0.3)
    _commit_axis(grid[-1, 0])
    return _svg(figure)


def _holes_chart(report: DropReport) -> str:
    plt = _pyplot()
    columns = report.commits.to_pydict()
    figure, axes = plt.subplots(figsize=(10, 2.5))
    axes.bar(columns["commit_id"], columns["skipped_ids"], 0.8, color="#8c564b", label="ids skipped")
    _commit_axis(axes)
    axes.set_ylabel("ids skipped")
    axes.grid(axis="y", alpha=0.3)
    return _svg(figure)


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(row[c]))}</td>" for c in columns) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(report: DropReport) -> str:
    """The report as one self-contained HTML page, with its charts (needs matplotlib: ``seqdedup[report]``)."""
    data = report.to_dict()
    totals = data["totals"]
    e = html.escape
    kept = {"nothing": "no run log row and no ledger row", "counts": "the run log's counts, no ledger row",
            "keys": "a ledger row per dropped entry", "rows": "a ledger row per dropped entry, with its values"}
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>seqdedup report: {e(report.topic)}</title><style>{STYLE}</style></head><body>",
        f"<h1>What {e(report.topic)} dropped, and why</h1>",
        f'<p class="note">The latest {len(data["commits"])} commits of the run log'
        + (f" from {e(data['since'])} on" if data["since"] else "")
        + f"; drawn "
          f"{e(dt.datetime.now().isoformat(timespec='seconds'))}. The topic keeps "
          f"{e(kept[data['dropped_entries']])} (dropped_entries={e(data['dropped_entries'])}) and "
          f"{'records its holes' if data['gap_policy'] == 'record' else 'records no hole'} "
          f"(gap_policy={e(data['gap_policy'])}). Reasons are given only for statements that ran while the topic "
          "kept a ledger.</p>",
        _table([totals], list(totals)),
    ]
    if not data["commits"]:
        parts.append("<p>No statement of this topic is in its run log for this period.</p>")
    else:
        parts += ["<h2>Entries per commit</h2>", f"<figure>{_commits_chart(report)}</figure>",
                  "<h2>The producers with most drops</h2>", f"<figure>{_producers_chart(report)}</figure>",
                  _table(data["producers"], ["producer", *DropReport.FIGURES])]
        if data["producers_over_commits"]:
            parts += ["<h2>Their drops per commit</h2>",
                      '<p class="note">Bars: entries dropped, by reason (colours as above); line: entries written.</p>',
                      f"<figure>{_producers_over_commits_chart(report)}</figure>"]
        if totals["holes"]:
            parts += ["<h2>Holes after the producers' marks</h2>", f"<figure>{_holes_chart(report)}</figure>"]
    # (JSON in a script element of its own type: not run; "</" escaped so that no value ends the element)
    payload = json.dumps(data).replace("</", "<\\/")
    parts += [f'<script type="application/json" id="seqdedup-report">{payload}</script>', "</body></html>"]
    return "\n".join(parts)


__all__ = ["page"]
