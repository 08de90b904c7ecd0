"""A statement's plan as named steps, for people to read: each plan's list of steps (``steps``), the very builders
the runner uses, rendered in order (tests/golden holds them per engine)."""
from __future__ import annotations

from sqlglot import exp

from . import exceptions, rows, window
from .steps import Inputs, Step

#: Each plan's steps, in the order they run.
PLANS: dict[str, dict[str, Step]] = {"window": window.STEPS, "rows": rows.STEPS, "exceptions": exceptions.STEPS}


def describe(kind: str, inputs: Inputs, only: list[str] | None = None) -> dict[str, exp.Expression]:
    """The steps of the plan ``kind`` ("window", "rows" or "exceptions"; those in ``only`` if given), each by its
    name with its tree. Steps that run only on a condition are all there; their names say when.

    Example:
        >>> import sqlglot
        >>> from seqdedup.sql.rewrite import expand_is_not_dup
        >>> d = expand_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT x FROM s WHERE is_not_dup(p, q)"))
        >>> inputs = Inputs(d, topic=exp.table_("t"), targets=["x"], values=["__sd_v0"], read_once=True,
        ...                 publish_time=exp.Literal.string("now"), commit=exp.convert(2), base=exp.convert(0))
        >>> list(describe("exceptions", inputs))[:3]
        ["the statement's rows, read once into a table", 'a large state: the producers the statement carries (only their marks are joined)', 'producers']
    """
    return {step.name: step.build(inputs) for key, step in PLANS[kind].items() if only is None or key in only}
