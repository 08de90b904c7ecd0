"""The multi-driver crash fuzz (drivers.py) in its short form: three Spark drivers on one shared metastore, writing
overlapping producers and ids into one topic at once, killed with SIGKILL at random moments and restarted; at the
end no entry is there twice, none is missing, and the recovered state equals the state recomputed from the log.
The long form is ``./dev fuzz-drivers --drivers 3 --kills 30`` (docs/reliability.md).
"""
from __future__ import annotations

import os

import pytest

from .drivers import run, violations


@pytest.mark.spark
def test_three_drivers_killed_at_random_write_each_entry_once(tmp_path):
    seed = int(os.environ.get("SEQDEDUP_FUZZ_SEED", "20261124"))
    result = run(drivers=3, kills=3, seed=seed, statements=4, workdir=tmp_path)
    print(result)
    assert violations(result) == [], result
    assert result["kills"] >= 1 and result["statements acknowledged"] >= 12, result   # attacked, and work got done
