"""A policy row seqdedup cannot read (``snapshot_interval_entries = 'abc'``, written by hand into
``seqdedup_policies``) is a PolicyError that names the row (scope, key, value) and the command that sets it right,
wherever the topic's policies are read (a look-up, a statement, recover), and nothing is written; setting a good value
over it, on the topic or at the row's own scope, sets the topic right. On every engine."""
from __future__ import annotations

import pytest

from seqdedup.errors import PolicyError
from seqdedup.core.recovery import recover

#: scope -> (the row's target, the command the error names, the setter of that scope in Python)
SCOPES = {
    "topic": (lambda d: d.key(), "seqdedup topic alter {topic} -p snapshot_interval_entries=VALUE",
              lambda d, value: d.session.alter_topic("events", snapshot_interval_entries=value)),
    "namespace": (lambda d: d.namespace, "ALTER DATABASE {namespace} SET DBPROPERTIES "
                  "('seqdedup.snapshot_interval_entries' = 'VALUE')",
                  lambda d, value: d.session.set_namespace_policy(d.namespace, snapshot_interval_entries=value)),
    "global": (lambda d: "", "SET seqdedup.snapshot_interval_entries = VALUE",
               lambda d, value: d.session.set_global_policy(snapshot_interval_entries=value)),
}


@pytest.mark.parametrize("scope", list(SCOPES))
def test_an_unreadable_policy_row_is_a_clear_error_until_a_good_value_is_set_over_it(dedup, scope):
    target, command, setter = SCOPES[scope]
    dedup.topic()
    dedup.send([("p", 0), ("p", 1)])
    dedup.around("INSERT INTO seqdedup_policies VALUES ('{}', '{}', 'snapshot_interval_entries', 'abc', 1000, "
                 "TIMESTAMP '2026-01-01 12:00:00')".format(scope, target(dedup)))
    dedup.restart()
    said = f"the {scope} policy snapshot_interval_entries = 'abc' (a row of seqdedup_policies: scope '{scope}', " \
           f"target '{target(dedup)}', key 'snapshot_interval_entries') is not a value seqdedup can read"
    fix = command.format(topic=dedup.key(), namespace=dedup.namespace)
    for what, use in {"look-up": lambda: dedup.session.topic("events").applied, "statement": lambda: dedup.send(
            [("p", 1), ("p", 2)]), "recover": lambda: recover(dedup.session.broker, "events")}.items():
        with pytest.raises(PolicyError) as refused:
            use()
        assert said in str(refused.value) and fix in str(refused.value), (what, str(refused.value))
    assert dedup.ids("p") == [0, 1]                     # nothing written

    dedup.session.alter_topic("events", snapshot_interval_entries=5)     # the topic's own value: read first
    assert dedup.session.topic("events").applied.snapshot_interval_entries == 5
    assert dedup.send([("p", 1), ("p", 2)]).written == 1
    setter(dedup, 7)                                    # a good value over the bad row, at its own scope
    topic = dedup.session.topic("events")
    assert topic.settings[scope]["snapshot_interval_entries"] == "7" and topic.applied
    assert recover(dedup.session.broker, "events").ok
