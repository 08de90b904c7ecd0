"""Whole statements kept as .sql files in queries/ (one source dialect, Spark SQL), parsed once and filled by
placeholder."""
from __future__ import annotations

import functools
from importlib import resources

import sqlglot
from sqlglot import exp

SOURCE_DIALECT = "spark"


@functools.cache
def _parsed(name: str) -> exp.Expression:
    text = resources.files(__package__).joinpath("queries", f"{name}.sql").read_text()
    tree = sqlglot.parse_one(text, read=SOURCE_DIALECT)
    for node in tree.walk():
        node.comments = None
    return tree


def template(name: str, **values: exp.Expression) -> exp.Expression:
    """The template ``name`` with every ``:placeholder`` replaced by the given expression.

    Example:
        >>> tree = template("snapshot_headers", topic=exp.Literal.string("main.t"),
        ...                 producer_sequences=exp.table_("producer_sequences"), visible=exp.true())
        >>> sorted({t.name for t in tree.find_all(exp.Table)})
        ['producer_sequences']
    """
    tree = exp.replace_placeholders(_parsed(name).copy(), **values)
    missing = sorted({p.name for p in tree.find_all(exp.Placeholder)})
    if missing:
        raise KeyError(f"template {name} needs values for: {', '.join(missing)}")
    return tree
