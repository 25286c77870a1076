"""``replace`` with the rename committers (manifest, file-v1) on local files: each partition the job
writes is swapped whole from the commit point on (`stages.swaps`), with Linux's RENAME_EXCHANGE
(``exchange``) and, as on HDFS, with two renames (``renames``). The scenario is
tests/support/replace_swap.py's; tests/hadoop/test_hdfs_replace.py runs it on HDFS.

Cost: about 6 s in all, most of it the crash sweep (about 2 x 40 small local jobs).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

import pytest
from support.faults import FaultInjectingStore, SimulatedCrash
from support.replace_swap import (
    EXPECTED,
    OLD,
    WATCHED,
    PartitionWatcher,
    assert_replaced,
    replace_job,
    run_replace,
    table_files,
    visible,
    without_exchange,
    write_table,
)
from support.stores import DelegatingStore
from support.workload import write_files

from airflow_commit_provider.core import job_control
from airflow_commit_provider.core.committers import resolve
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.store import Store, UnsupportedStoreError
from airflow_commit_provider.core.store.local import LocalStore

SWAPS: dict[str, Callable[[Store], Store]] = {"exchange": lambda store: store, "renames": without_exchange}


@pytest.fixture
def table(local_root: StorePath) -> StorePath:
    write_table(LocalStore(), local_root)
    return local_root


@pytest.mark.parametrize("swap", SWAPS)
@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_replace_swaps_exactly_the_written_partitions(table: StorePath, committer: str, swap: str) -> None:
    """dt=1's visible file is replaced by the job's two, and what another job keeps there (hidden
    files, a hidden folder) stays; dt=3 is renamed in; dt=2, dt=10 and a second job's leftovers at
    the top are untouched; nothing of the swap is left."""
    store = SWAPS[swap](LocalStore())
    job_id = uuid.uuid4().hex
    success = run_replace(committer, store, table, job_id)
    assert_replaced(store, table, job_id)
    assert success.iostatistics.counters["committer_partitions_swapped"] == 2


@pytest.mark.parametrize(("swap", "window"), [("exchange", False), ("renames", True)])
def test_what_a_reader_sees_while_a_partition_is_swapped(table: StorePath, swap: str, window: bool) -> None:
    """A reader looking at dt=1 after every store call of the job sees the old partition, then the
    new one, never a mix. With an exchange there is no moment between; with two renames, the
    partition is absent from the first rename to the second, the very next store call."""
    watcher = PartitionWatcher(SWAPS[swap](LocalStore()), table.join(WATCHED))
    run_replace("manifest", watcher, table, uuid.uuid4().hex)
    old, new = visible(OLD, WATCHED), visible(EXPECTED, WATCHED)
    seen = [state for _call, _op, state in watcher.states]
    assert seen == ([old, None, new] if window else [old, new])
    if window:
        (absent_at, op, _), (present_at, op_in, _) = watcher.states[1:]
        assert (op, op_in) == ("rename_directory", "rename_directory")
        assert present_at == absent_at + 1, "the partition is absent for one store call"
    else:
        assert watcher.states[1][1] == "exchange_directories"


def _crash_points(committer: str, table: StorePath, swap: str, job_id: str) -> list[int]:
    """The numbers of the changing store calls a clean run makes from its commit point on."""
    clean = FaultInjectingStore(SWAPS[swap](LocalStore()))
    run_replace(committer, clean, table, job_id)
    layout = JobLayout(table, job_id)
    decided, recorded = (
        next(call.index for call in clean.calls if call.mutating and call.path == str(path))
        for path in (layout.outcome, layout.job_record)
    )
    return [call.index for call in clean.calls[decided + 1 : recorded + 1] if call.mutating]


@pytest.mark.parametrize("swap", SWAPS)
def test_a_crash_after_the_commit_point_is_rolled_forward(tmp_path: object, swap: str) -> None:
    """The driver dies at each changing store call after the commit point, before or after the call
    takes effect; a later try (`job_control.finish_or_fence`, as an Airflow retry settles a job)
    finishes the swaps: the table is then exactly as after a clean run, each partition swapped
    once (the old files never come back, the new ones are all there)."""
    job_id = uuid.uuid4().hex
    points = _crash_points("manifest", _fresh_table(tmp_path, "clean"), swap, job_id)
    assert len(points) > 10
    # A crash before call k+1 leaves what a crash after call k does: one before the first, then after each.
    for point, mode in [(points[0], "crash"), *((point, "crash_after") for point in points)]:
        table = _fresh_table(tmp_path, f"{point}-{mode}")
        store = FaultInjectingStore(SWAPS[swap](LocalStore()))
        store.inject(at=point, mode=mode)
        with pytest.raises(SimulatedCrash):
            run_replace("manifest", store, table, job_id)
        store.revive()
        status = job_control.finish_or_fence(store, table, job_id, "manifest")
        assert status.state == job_control.JobState.COMMITTED, (point, mode)
        assert_replaced(store, table, job_id)


def _fresh_table(tmp_path: object, name: str) -> StorePath:
    table = StorePath.parse(f"{tmp_path}/{name}/table")
    write_table(LocalStore(), table)
    return table


@pytest.mark.parametrize(
    ("files", "refusal"),
    [
        ({"top.bin": b"x"}, r"writes files directly into .*: write partitioned output"),
        ({"a=1/x.bin": b"x", "a=1/b=2/y.bin": b"y"}, r"writes into both a=1 and a=1/b=2 inside it"),
    ],
)
def test_a_job_whose_partitions_cannot_be_swapped_is_refused_before_its_commit_point(
    table: StorePath, files: dict[str, bytes], refusal: str
) -> None:
    store = LocalStore()
    job_id = uuid.uuid4().hex
    job = replace_job("manifest", store, table, job_id)
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    attempt.setup_task()
    write_files(attempt, files)
    with pytest.raises(CommitError, match=refusal):
        job.commit_job([attempt.commit_task()])
    assert job_control.inspect_job(store, table, job_id).state == job_control.JobState.ACTIVE
    assert job.abort_job() is None
    assert table_files(store, table) == OLD, "nothing changed"


def test_replace_needs_a_store_that_renames_folders() -> None:
    """Refused in one line when the committer is made, before any request (as on the S3 stores,
    which have no folders): here a local store that says it cannot rename them."""
    store = DelegatingStore(LocalStore())
    store.capabilities = dataclasses.replace(store.capabilities, atomic_directory_rename=False)
    with pytest.raises(UnsupportedStoreError) as refused:
        replace_job("manifest", store, StorePath.parse("/t"), uuid.uuid4().hex)
    assert str(refused.value) == (
        "conflict_mode='replace' with the manifest committer needs a store with atomic directory rename; "
        "DelegatingStore does not provide it"
    )


def test_resolve_plans_replace_by_swap_for_partitioned_writes() -> None:
    plan = resolve("manifest", "/data/t", partition_columns=("dt",), conflict_mode="replace")
    assert plan.committer_conflict_mode == "replace" and not plan.check_conflicts_before_setup
    assert resolve(
        None, "hdfs://nn:8020/t", partition_columns=("dt",), conflict_mode="replace"
    ).committer == ("manifest"), "HDFS has no multipart uploads: a partitioned replace there swaps folders"
    with pytest.raises(ValueError, match=r"swaps the partition folders .* give partition columns"):
        resolve("file-v1", "/data/t", conflict_mode="replace")
    with pytest.raises(ValueError, match=r"the manifest committer cannot honour it.*save mode"):
        resolve("manifest", "file:///t", partition_columns=("dt",), conflict_mode="replace", engine="hadoop")
