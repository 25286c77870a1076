"""The state a stage works with, and the bounded thread pool a commit call owns."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
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
    progress: ProgressCallback | None = None

    @property
    def job_id(self) -> str:
        return self.layout.job_id


def run_parallel(
    items: Iterable[T],
    action: Callable[[T], object],
    threads: int,
    *,
    total: int | None = None,
    progress: ProgressCallback | None = None,
    progress_interval: float = 5.0,
) -> int:
    """Apply `action` to every item on a pool that lives for this call only (HADOOP-16798).

    At most `threads * 2` items are in flight, so an iterator of millions of entries is consumed
    in bounded memory. The first failure stops new submissions and is re-raised once in-flight
    work has finished. Returns the number of items done.
    """
    done = 0
    last_report = time.monotonic()
    lock = threading.Lock()
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="commit") as pool:
        in_flight: set[Future[object]] = set()

        def drain(return_when: str) -> None:
            nonlocal done, failure, last_report
            finished, _ = wait(in_flight, return_when=return_when)
            for future in finished:
                in_flight.discard(future)
                error = future.exception()
                if error is not None and failure is None:
                    failure = error
                elif error is None:
                    with lock:
                        done += 1
            if progress and time.monotonic() - last_report >= progress_interval:
                last_report = time.monotonic()
                progress(done, total if total is not None else -1)

        for item in items:
            if failure is not None:
                break
            in_flight.add(pool.submit(action, item))
            if len(in_flight) >= threads * 2:
                drain(FIRST_COMPLETED)
        while in_flight:
            drain(FIRST_COMPLETED)
    if failure is not None:
        raise failure
    if progress:
        progress(done, total if total is not None else done)
    return done
