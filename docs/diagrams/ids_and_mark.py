"""Draws ids-and-mark.svg: one producer's entries in a statement against its high-water mark, as the reference model
(the tests' oracle) decides them. Run ``python docs/diagrams/ids_and_mark.py`` after changing the rules or the
picture; tests/test_docs_diagrams.py checks that the file is what this script draws."""
from __future__ import annotations

from pathlib import Path

from seqdedup.udfs import DupStatus, Entry, SequenceTracker

#: The mark before the statement, and the statement's entries (lowest, highest) in arrival order.
BEFORE = 3
ARRIVALS = [(2, 2), (4, 4), (4, 4), (6, 8), (7, 7), (5, 9), (9, 9), (12, 12)]
NOTES = {0: "below the mark", 2: "repeat", 4: "came late", 5: "straddles the mark: rejected whole (R2)",
         7: "a hole is fine (R3)"}

WIDTH, HEIGHT, LEFT, TOP, BOTTOM = 760, 360, 56, 36, 56
TOP_ID = 13
WRITTEN, DROPPED, MARK = "#1a7f37", "#cf222e", "#0969da"


def decide() -> tuple[list[DupStatus], list[int]]:
    """Each entry's status in one statement, from the reference model, and the mark each one met."""
    tracker = SequenceTracker()
    tracker.apply_statement([Entry("p", BEFORE)])
    entries = [Entry("p", s, h if h != s else None) for s, h in ARRIVALS]
    statuses = tracker.apply_statement(entries, order=list(range(len(entries)))).statuses
    marks, mark = [], BEFORE
    for entry, status in zip(entries, statuses):
        marks.append(mark)
        mark = entry.highest if status is DupStatus.NOT_DUP else mark
    assert mark == tracker.last_sequence_id("p")
    return statuses, marks


def draw() -> str:
    statuses, marks = decide()
    step = (WIDTH - LEFT - 24) / len(ARRIVALS)

    def x(i: float) -> float:
        return LEFT + step * (i + 0.5)

    def y(sequence_id: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - sequence_id / TOP_ID)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           '<title>One producer\'s sequence ids against its high-water mark over one statement</title>',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">Producer p: entries of one statement, '
           'in arrival order, against its mark H(p)</text>']
    for sequence_id in range(0, TOP_ID + 1, 2):
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - 24}" y1="{y(sequence_id):.1f}" y2="{y(sequence_id):.1f}" '
                   'stroke="#eaeef2"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(sequence_id) + 4:.1f}" text-anchor="end">{sequence_id}</text>')
    out.append(f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2:.0f}" transform="rotate(-90 14 '
               f'{(TOP + HEIGHT - BOTTOM) / 2:.0f})" text-anchor="middle">sequence id</text>')
    # the mark: a step, the value each entry met, raised only by written entries
    points = []
    for i, mark in enumerate(marks):
        points += [f"{x(i) - step / 2:.1f},{y(mark):.1f}", f"{x(i) + step / 2:.1f},{y(mark):.1f}"]
    out.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{MARK}" stroke-width="2" '
               'stroke-dasharray="6 3"/>')
    for i, ((s, h), status) in enumerate(zip(ARRIVALS, statuses)):
        colour = WRITTEN if status is DupStatus.NOT_DUP else DROPPED
        if h != s:
            out.append(f'<rect x="{x(i) - 5:.1f}" y="{y(h):.1f}" width="10" height="{y(s) - y(h):.1f}" rx="4" '
                       f'fill="{colour if status is DupStatus.NOT_DUP else "white"}" stroke="{colour}" '
                       'stroke-width="2"/>')
        else:
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(s):.1f}" r="6" '
                       f'fill="{colour if status is DupStatus.NOT_DUP else "white"}" stroke="{colour}" '
                       'stroke-width="2"/>')
        label = f"({s})" if h == s else f"({s}..{h})"
        out.append(f'<text x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{label}</text>')
        out.append(f'<text x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 34}" text-anchor="middle" fill="{colour}">'
                   f'{status.value}</text>')
        if i in NOTES:       # on the right of the entry, or on its left in the right half
            left = i >= len(ARRIVALS) / 2
            out.append(f'<text x="{x(i) + (-10 if left else 9):.1f}" y="{y(max(s, h)) - (2 if left else 10):.1f}" '
                       f'font-size="11" fill="#57606a" text-anchor="{"end" if left else "start"}">{NOTES[i]}</text>')
    legend = HEIGHT - 10
    out += [f'<line x1="{LEFT}" x2="{LEFT + 28}" y1="{legend - 4}" y2="{legend - 4}" stroke="{MARK}" '
            'stroke-width="2" stroke-dasharray="6 3"/>',
            f'<text x="{LEFT + 34}" y="{legend}">H(p) each entry meets (written entries raise it)</text>',
            f'<circle cx="{LEFT + 370}" cy="{legend - 4}" r="5" fill="{WRITTEN}"/>',
            f'<text x="{LEFT + 380}" y="{legend}">written</text>',
            f'<circle cx="{LEFT + 450}" cy="{legend - 4}" r="5" fill="white" stroke="{DROPPED}" stroke-width="2"/>',
            f'<text x="{LEFT + 460}" y="{legend}">dropped: lowest id &#8804; H(p)</text>',
            "</svg>"]
    return "\n".join(out) + "\n"


PATH = Path(__file__).with_name("ids-and-mark.svg")

if __name__ == "__main__":
    PATH.write_text(draw())
    print(f"wrote {PATH}")
