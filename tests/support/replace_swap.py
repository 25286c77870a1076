"""``replace`` on a rename store, one scenario for every store that swaps partition folders (local
files in tests/core, HDFS in tests/hadoop): a table that holds what a replace must keep, a job that
replaces some of its partitions, and a store wrapper that watches a partition as a reader would.

The table before (``old``): ``dt=1`` (replaced: its visible file goes, the hidden files and folder
another job keeps there stay), ``dt=2`` and ``dt=10`` (not written: untouched, ``dt=1`` is not a
prefix of ``dt=10``), and a second job's leftovers at the top. The job writes ``dt=1`` (two tasks)
and ``dt=3`` (a new partition, simply renamed in).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.committers.base import Committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import RECORDS_DIR, SUCCESS_FILENAME, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from support.invariants import read_success, store_files
from support.stores import DelegatingStore
from support.workload import make_options, write_files

R = TypeVar("R")

OLD = {
    "dt=1/old-1.bin": b"old 1",
    "dt=1/_SUCCESS": b"another job's partition marker",
    "dt=1/.another-job": b"hidden",
    "dt=1/_temporary/another-job/work.bin": b"another job's work",
    "dt=2/old-2.bin": b"old 2",
    "dt=10/old-10.bin": b"old 10",
    "_temporary/second-job/leftover.bin": b"a second job's leftovers",
}
#: What each task of the job writes.
TASKS = (
    {"dt=1/part-00000.bin": b"new 1 from task 0", "dt=3/part-00000.bin": b"new 3"},
    {"dt=1/part-00001.bin": b"new 1 from task 1"},
)
WRITTEN = {name: data for files in TASKS for name, data in files.items()}
#: The table after the job: its files replace dt=1's visible ones and add dt=3; all else stays.
EXPECTED = {**{name: data for name, data in OLD.items() if name != "dt=1/old-1.bin"}, **WRITTEN}
#: The partition a reader watches: replaced while it already exists.
WATCHED = "dt=1"


def write_table(store: Store, dest: StorePath) -> None:
    for name, data in OLD.items():
        store.write_bytes(dest.join(name), data)


def run_replace(committer: str, store: Store, dest: StorePath, job_id: str, **options: object) -> SuccessData:
    """Set up, write and commit the job with ``conflict_mode='replace'``; returns its `_SUCCESS`."""
    job = replace_job(committer, store, dest, job_id, **options)
    job.setup_job()
    results = []
    for task, files in enumerate(TASKS):
        attempt = job.task_attempt(task, 0)
        attempt.setup_task()
        write_files(attempt, files)
        results.append(attempt.commit_task())
    return job.commit_job(results)


def replace_job(committer: str, store: Store, dest: StorePath, job_id: str, **options: object) -> Committer:
    return create_committer(
        committer, store, dest, job_id, make_options(conflict_mode="replace", threads=1, **options)
    )


def table_files(store: Store, dest: StorePath) -> dict[str, bytes]:
    """Every file of the table but the commit records (the top `_SUCCESS`, `_airflow_commit/`)."""
    return {
        name: data
        for name, data in store_files(store, dest).items()
        if name != SUCCESS_FILENAME and not name.startswith(f"{RECORDS_DIR}/")
    }


def assert_replaced(store: Store, dest: StorePath, job_id: str) -> None:
    """Complete and exclusive: the table is `EXPECTED` to the byte, `_SUCCESS` names exactly the
    job's files, and the job's folder (its incoming and replaced partitions) is gone."""
    assert table_files(store, dest) == EXPECTED
    success = read_success(store, dest)
    assert success.job_id == job_id
    assert sorted(success.filenames) == sorted(dest.join(name).uri() for name in WRITTEN)
    assert not store.directory_exists(JobLayout(dest, job_id).job_dir)


def without_exchange(store: Store) -> Store:
    """`store` as a store that cannot exchange folders: a swap takes its two renames."""
    wrapped = DelegatingStore(store)
    wrapped.capabilities = dataclasses.replace(store.capabilities, atomic_directory_exchange=False)
    return wrapped


State = frozenset[tuple[str, bytes]] | None
"""A partition as a reader finds it: its visible files and their bytes; None when it is absent."""


class PartitionWatcher(DelegatingStore):
    """Looks at one partition after every call that changes the store, as a reader would (through
    the store it wraps: its own looks are not calls of the job), and keeps each new state it finds
    with the number of the call that made it. The job's calls pause while it looks: a reader
    between any two of them, made deterministic."""

    def __init__(self, inner: Store, partition: StorePath) -> None:
        super().__init__(inner)
        self.partition = partition
        self.calls = 0
        self.states: list[tuple[int, str, State]] = [(0, "start", self._look())]

    def _delegate(self, op: str, where: object, mutating: bool, action: Callable[[], R]) -> R:
        result = action()
        self.calls += 1
        if mutating:
            state = self._look()
            if state != self.states[-1][2]:
                self.states.append((self.calls, op, state))
        return result

    def _look(self) -> State:
        if not self.inner.directory_exists(self.partition):
            return None
        return frozenset(
            (status.path.name, self.inner.read_bytes(status.path))
            for status in self.inner.list_files(self.partition)
            if status.path.parent == self.partition and not status.path.name.startswith(("_", "."))
        )


def visible(files: dict[str, bytes], partition: str) -> State:
    """The state a reader should find for `partition` given the table's files."""
    return frozenset(
        (name.rsplit("/", 1)[1], data)
        for name, data in files.items()
        if name.rsplit("/", 1)[0] == partition and not name.rsplit("/", 1)[1].startswith(("_", "."))
    )
