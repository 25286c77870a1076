"""The state a stage works with."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from airflow_commit_provider.core.commit_operations import CommitOperations
from airflow_commit_provider.core.formats.jsonio import now_millis
from airflow_commit_provider.core.formats.phases import CommitPhase, request_counts
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.parallel import ProgressCallback
from airflow_commit_provider.core.store.base import Store

log = logging.getLogger("airflow_commit_provider.commit")


@dataclass
class JobContext:
    store: Store
    layout: JobLayout
    committer: str
    options: CommitOptions
    statistics: IOStatistics = field(default_factory=IOStatistics)
    """The committer's own: stage durations and counts, and the committed tasks' statistics."""
    progress: ProgressCallback | None = None
    phases: list[CommitPhase] = field(default_factory=list)
    """The phases of this process's job commit so far, for the job record (`stages.success`)."""
    _store_mark: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._store_mark = self.store.statistics.snapshot()

    @property
    def job_id(self) -> str:
        return self.layout.job_id

    @property
    def operations(self) -> CommitOperations:
        """The store's commit operations (initiate, parts, complete, abort, list pending): the only
        way the stages and committers make those calls, counted in the job's statistics and run on
        its threads."""
        return CommitOperations(self.store, self.statistics, self.options.threads)

    def count_store_requests_from_here(self) -> None:
        """Start the store request count that `_SUCCESS` reports at the start of job commit.

        Only the commit's own requests: the tasks' are in their manifests already, and a store
        shared with the tasks (one process) would count them twice.
        """
        self._store_mark = self.store.statistics.snapshot()

    def job_statistics(self) -> IOStatistics:
        """What `_SUCCESS` reports, as Hadoop's does: the committer's statistics (which hold the
        committed tasks') plus the store requests of the job commit."""
        combined = IOStatistics()
        combined.merge(self.statistics)
        combined.merge(self.store.statistics.counters_since(self._store_mark))
        return combined

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase of the job commit and count the store requests it makes.

        Counts the process's store, as `job_statistics` does: in local mode, requests of tasks
        running meanwhile are counted too.
        """
        mark, start = self.store.statistics.snapshot(), now_millis()
        yield
        requests = request_counts(self.store.statistics.counters_since(mark).counters)
        self.phases.append(CommitPhase(name, start, now_millis(), requests))
