"""The SQL text an adapter runs for a tree (``EngineAdapter.sql``): seqdedup's own tables named with the catalog's
database, and the text of a tree the statement path keeps generated once."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.schema import IN_CATALOG
from seqdedup.kept import Kept

#: The most texts an adapter keeps (``Kept``).
KEPT_TEXTS = 1024


def sql(adapter, tree: exp.Expression) -> str:
    """The text ``adapter``'s engine runs for ``tree``. A tree the statement path keeps from one statement to the
    next (``tree.meta["kept"]``) is generated once."""
    if not tree.meta.get("kept"):
        return _generate(adapter, tree)
    texts = adapter.__dict__.setdefault("_texts", Kept(KEPT_TEXTS))
    text = texts.get(id(tree))
    if text is None or text[0] is not tree:     # (by identity: a tree kept is kept whole, and ``id`` may come again)
        text = texts.keep(id(tree), (tree, _generate(adapter, tree)))
    return text[1]


def _generate(adapter, tree: exp.Expression) -> str:
    """An engine looks up a name without a database in the session's current one at each query, and the user may
    change it (``USE``, DuckDB's ``ATTACH``) or hide a table behind a temporary one of the same name: seqdedup's
    own tables (``IN_CATALOG``) are named with the database the catalog is in, where ``connect`` found it
    (``DEFAULT_NAMESPACE``, in ``DATABASE`` where the engine has several)."""
    def unqualified(table: exp.Table) -> bool:
        return table.args.get("db") is None and table.meta.get(IN_CATALOG, False)

    if any(map(unqualified, tree.find_all(exp.Table))):
        tree = tree.copy()      # (the caller's tree, kept ones and shared templates too, stays as built)
        for table in filter(unqualified, list(tree.find_all(exp.Table))):
            table.set("db", exp.to_identifier(adapter.DEFAULT_NAMESPACE, quoted=True))
            if adapter.DATABASE:
                table.set("catalog", exp.to_identifier(adapter.DATABASE, quoted=True))
    return tree.sql(dialect=adapter.DIALECT)
