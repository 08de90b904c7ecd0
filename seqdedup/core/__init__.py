"""The core of seqdedup: the ``Broker`` its jobs run on (``broker``), a statement run in one commit (``statement``,
``writer``), the topics' state in memory (``topic_state``, ``marks``), its snapshots (``snapshots``) and how it is
rebuilt (``recovery``), a topic's creation, policy changes and figures (``creation``, ``policy_changes``,
``stats``), what a session refuses to run (``guards``), compaction, the rows other tools wrote (``foreign``),
producers' leases and turns, locks, and the results a statement returns. It imports only the lower layers (udfs,
catalog, sql, extensions) and the root's ``errors`` and ``failpoints``; the clients and the ``Session`` facade build
on it."""
