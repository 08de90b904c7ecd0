"""The rule for positions, as every test checks it: unique, and increasing in commit order.

A position is an entry's message id (SEMANTICS.md, "position"): no two entries share one, and every entry of a later
commit has a higher position than every entry of an earlier commit. Within a commit they need not be dense or follow
arrival order (Pulsar's id is (ledger, entry): the commit plays the ledger).
"""
from __future__ import annotations

from typing import Iterable


def position_problem(rows: Iterable[tuple[int, int]]) -> str | None:
    """What breaks the rule in ``rows`` of (commit, position), or None.

    Example:
        >>> position_problem([(1, 1), (1, 5), (2, 6)]) is None
        True
        >>> position_problem([(1, 1), (1, 7), (2, 6)])
        'commit 2 has a position (6) at or below one of commit 1 (7)'
        >>> position_problem([(1, 3), (1, 3)])
        'position 3 is given twice'
    """
    rows = sorted(rows)
    positions = [p for _, p in rows]
    if len(set(positions)) != len(positions):
        twice = next(p for p in positions if positions.count(p) > 1)
        return f"position {twice} is given twice"
    highest: tuple[int, int] | None = None      # (commit, its highest position) of the commits before
    for commit in sorted({c for c, _ in rows}):
        mine = [p for c, p in rows if c == commit]
        if highest is not None and min(mine) <= highest[1]:
            return f"commit {commit} has a position ({min(mine)}) at or below one of commit {highest[0]} ({highest[1]})"
        if highest is None or max(mine) > highest[1]:
            highest = (commit, max(mine))
    return None
