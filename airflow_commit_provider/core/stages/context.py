"""The state a stage works with, and the bounded thread pool a commit call owns."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TypeVar

from airflow_commit_provider.core.formats.iostats import IOStatistics
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.store.base import Store

log = logging.getLogger("airflow_commit_provider.commit")

T = TypeVar("T")
ProgressCallback = Callable[[int, int], None]


@dataclass
class JobContext:
    store: Store
    layout: JobLayout
    committer: str
    options: CommitOptions
    statistics: IOStatistics = field(default_factory=IOStatistics)
    """The committer's own: stage durations and counts, and the committed tasks' statistics."""
    progress: ProgressCallback | None = None
    _store_mark: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._store_mark = self.store.statistics.snapshot()

    @property
    def job_id(self) -> str:
        return self.layout.job_id

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


def run_parallel(
    items: Iterable[T],
    action: Callable[[T], object],
    threads: int,
    *,
    total: int | None = None,
    progress: ProgressCallback | None = None,
    progress_interval: float = 5.0,
) -> int:
    """Apply `action` to every item on `threads` workers that live for this call only (HADOOP-16798).

    Each worker takes the next item from the shared iterator, so an iterator of millions of
    entries is consumed one item per worker, in bounded memory, with no per-item futures: at
    job commit the client's CPU is the limit. The first failure stops the others taking new
    items and is re-raised once they have finished. Returns the number of items done.
    """
    source = iter(items)
    lock = threading.Lock()
    done = 0
    failure: BaseException | None = None

    def work() -> None:
        nonlocal done, failure
        while True:
            with lock:
                if failure is not None:
                    return
                try:
                    item = next(source)
                except StopIteration:
                    return
                except BaseException as error:  # a failing source stops the work like a failing action
                    failure = error
                    return
            try:
                action(item)
            except BaseException as error:
                with lock:
                    failure = failure or error
                return
            with lock:
                done += 1

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="commit") as pool:
        workers = [pool.submit(work) for _ in range(threads)]
        while wait(workers, timeout=progress_interval if progress else None).not_done:
            if progress:
                progress(done, total if total is not None else -1)
    if failure is not None:
        raise failure
    if progress:
        progress(done, total if total is not None else done)
    return done
