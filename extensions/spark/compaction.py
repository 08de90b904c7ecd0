"""Compaction on Spark: the partitions of many small commits merged into one, switched in one metastore
transaction, the merged ones dropped (at once where this process is the only writer, after a grace period
where others write) and their directories removed."""
from __future__ import annotations

import logging
import os
import time
import uuid

from sqlglot import exp

from seqdedup.catalog.names import STAGING
from seqdedup.catalog.schema import COMMITS, catalog_table, written_by_seqdedup
from seqdedup.catalog.state import literal
from seqdedup.errors import EngineError, TopicError
from seqdedup.failpoints import failpoint

from .collaborator import Collaborator
from .errors import moved_under
from .frames import Observed
from .layout import Unit, attempt_of, covered_since, local_path, remove_directory, remove_unread, staging_name

log = logging.getLogger("seqdedup.compaction")


def changed_under(topic) -> TopicError:
    """The error of a compaction that finds the partitions it planned to merge changed (another one ran)."""
    return TopicError(f"the partitions of {topic.key} changed while it was being compacted (another compaction "
                      "ran): run the compaction again")


class Compaction(Collaborator):
    def ranges(self, topic) -> list[tuple[int, int]]:
        return [(unit.first, unit.last) for unit in self.adapter.partitions.layout(topic).units]

    def drop_merged(self, topic) -> int:
        """Where this process is the only writer, every covered partition, and the directories no partition reads
        (those a compaction cut short left, failed commits' rows) where the warehouse is local. Where other drivers
        write, the covered partitions older than COVERED_GRACE; two drivers may drop the same ones at once: the one
        that finds them gone leaves them to the other (a clean-up, not part of what it was doing)."""
        layout = self.adapter.partitions.layout(topic)
        covered = layout.covered
        if not self.adapter.exclusive:
            covered = [unit for unit in covered if covered_since(unit) <= time.time() - self.adapter.COVERED_GRACE]
        try:
            self.adapter.partitions.drop(topic, [unit.last for unit in covered])
        except EngineError as error:
            if self.adapter.exclusive or not moved_under(error):
                raise
            log.info("[%s] left the partitions a compaction merged to another driver dropping them: %s", topic.key,
                     error)
            return 0
        if layout.units:
            registered = layout.units + [unit for unit in layout.covered if unit not in covered]
            grace = 0.0 if self.adapter.exclusive else self.adapter.COVERED_GRACE
            remove_unread(self.adapter.files.location(topic), registered, grace)
        return len(covered)

    def merge(self, topic, ranges: list[tuple[int, int]]) -> int:
        """Four steps, the second the one that counts: (1) the rows of the partitions are written, in position
        order, to a new directory named for the commits it holds (``<last>-<attempt>-<n>-c<first>``, the attempt
        the last commit's winner); (2) in one metastore transaction (``_relocate``) the last partition is pointed at
        it and each of the others at an empty directory of its own: from then on every read, seqdedup's or any
        other tool's, sees each entry once; the others are *covered* (``Layout``), their commits still published;
        (3) they are dropped (where other drivers write, once COVERED_GRACE has passed: ``drop_merged``); (4) the
        partitions' old directories are removed. Killed before (2), the new directory
        is an orphan nobody reads; after it, the next writer to open the topic drops what is left and removes the
        directories nobody reads (``drop_merged``). Where several drivers write, the winners of the commits merged
        are first added to COMMITS: their partitions, which named them, are going."""
        F = self.F

        self.adapter.check_writable(None, f"a compaction of {topic.key}")
        listed = {(unit.first, unit.last): unit for unit in self.adapter.partitions.layout(topic).units}
        if any(pair not in listed for pair in ranges):
            raise changed_under(topic)
        units = [listed[pair] for pair in ranges]
        last = units[-1]
        if not self.adapter.exclusive:
            self._log_winners(topic, [unit for unit in units if unit.commits == 1])
        staging = f"{self.adapter.files.location(topic)}/{STAGING}"
        directory = (f"{staging}/{last.last}-{attempt_of(last)}-{uuid.uuid4().hex[:8]}"
                     f"-c{units[0].first}")
        rows = exp.select(*[exp.column(name, quoted=True) for name, _ in self.adapter.files.columns_of(topic)]).from_(
            topic.table.copy()).where(exp.column("_commit").isin(*[exp.convert(unit.last) for unit in units]))
        foreign = F.expr(self.adapter.sql(exp.not_(written_by_seqdedup()))).cast("int")
        with self.adapter.errors():
            observed = Observed(self.adapter.frame(rows), rows=F.count(F.lit(1)), foreign=F.sum(foreign))
            observed.frame.drop("_commit").orderBy("_position").write.mode("error").parquet(directory)
            got = observed.values()
        count, stray = got["rows"], got["foreign"]
        if stray:       # merged, they would share files with seqdedup's rows, which a quarantine moves whole
            remove_directory(directory)
            raise TopicError(f"{topic.key} holds {stray} rows seqdedup did not write in the partitions of commits "
                             f"{units[0].first} to {last.last}; nothing was merged. Move them aside first (`seqdedup "
                             f"topic quarantine {topic.key}`), then compact")
        failpoint("compact_after_write")
        if last not in self.adapter.partitions.layout(topic).units:
            remove_directory(directory)
            raise changed_under(topic)
        token = f"{uuid.uuid4().hex[:8]}-e{int(time.time())}"     # (when they are covered: covered_since)
        emptied = {unit.last: f"{self.adapter.files.location(topic)}/{STAGING}/{unit.last}-{attempt_of(unit)}-{token}"
                   for unit in units[:-1]}
        for empty in emptied.values():
            if local_path(empty):
                os.makedirs(local_path(empty))
        self.adapter.partitions.relocate(topic, {last.last: directory, **emptied})
        failpoint("compact_after_switch")
        if self.adapter.exclusive:     # (elsewhere they stay registered, their numbers taken, for COVERED_GRACE)
            self.adapter.partitions.drop(topic, list(emptied))
        failpoint("compact_after_drop")
        if self.adapter.exclusive:     # (elsewhere another driver's query may be reading them: drop_merged, later)
            for unit in units:
                if unit.location:
                    remove_directory(unit.location)
        with self.adapter.errors():
            self.spark.catalog.refreshTable(self.adapter.sql(topic.table))
        return count

    def _log_winners(self, topic, units: list[Unit]) -> None:
        """Add to COMMITS the winners of these one-commit partitions that are not there yet (named by their
        directories, as ``_described`` reads them)."""
        logged = {n for (n,) in self.adapter.fetchall(exp.select("commit_id").from_(
            catalog_table("seqdedup_commits")).where(exp.column("topic").eq(exp.Literal.string(topic.key))))}
        missing = [unit for unit in units if unit.last not in logged and unit.location]
        if missing:
            rows = exp.values([(literal(topic.key), literal(unit.last), literal(staging_name(unit.location)[1]))
                               for unit in missing], alias="w", columns=["topic", "commit_id", "attempt"])
            self.adapter.execute(exp.insert(exp.select("topic", "commit_id", "attempt", exp.cast(
                exp.func("current_timestamp"), "timestamp")).from_(rows), catalog_table("seqdedup_commits"),
                columns=list(COMMITS)))
