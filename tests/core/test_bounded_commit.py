"""Job commit at any size (issue 28, `docs/bounded-commits.md`): `_SUCCESS` and the job record stay
small whatever the job wrote, the file and partition lists are written before the commit point and
named by the outcome, a roll-forward uses the same lists, and a job that does not commit leaves none.
"""

from __future__ import annotations

import json
import re

import pytest
from support.faults import FaultInjectingStore, SimulatedCrash
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_aborted, assert_committed, store_files
from support.workload import JobRun, expected_output

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import iter_file_list, iter_partitions
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import (
    FILENAMES_LIMIT,
    PARTITIONS_LIMIT,
    SENSOR_READ_BYTES,
    SuccessData,
)
from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

#: More partitions than `_SUCCESS` lists inline, so the partition list is written too.
PARTITIONS = PARTITIONS_LIMIT + 20


def _lists(store: Store, dest: StorePath, job_id: str) -> list[str]:
    """The files under the job's lists folder, `_airflow_commit/<jobId>/`, relative to `dest`."""
    return sorted(
        f"{RECORDS_DIR}/{job_id}/{name}" for name in store_files(store, dest.join(RECORDS_DIR, job_id))
    )


def _outcome(store: Store, job: JobRun) -> JobOutcome:
    path = job.committer.layout.outcome
    return JobOutcome.from_bytes(store.read_bytes(path), str(path), job.job_id)


def _partitioned_job(env: CommitEnv, name: str = "partitioned") -> tuple[JobRun, list]:
    """A job whose two tasks write `PARTITIONS` partitions, some of them from both tasks."""
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    first = job.run_task(0, 0, [f"dt={p:03d}/a.bin" for p in range(0, PARTITIONS, 2)] + ["top.bin"])
    second = job.run_task(1, 0, [f"dt={p:03d}/b.bin" for p in range(0, PARTITIONS)])
    return job, [first, second]


def _without_numbers(raw: bytes) -> bytes:
    """`raw` with every digest and job id (hex) one `#` and every other run of digits one zero: what
    is left depends on no count's value, and grows with anything stored per file or partition."""
    return re.sub(rb"[0-9]+", b"0", re.sub(rb"[0-9a-f]{16,}", b"#", raw))


def _committed_job(env: CommitEnv, files: int, partitions: int) -> tuple[bytes, bytes]:
    """A job of four tasks writing `files` files over `partitions` `dt=` partitions, committed; its
    `_SUCCESS` and job record, after checking that everything a check needs lies in `_SUCCESS`'s
    first `SENSOR_READ_BYTES` and that the file list holds every file, in key order."""
    tasks = 4
    dest = env.root.join(f"out-{files}")  # names that differ in their digits alone
    job = JobRun.create("manifest", env.store, dest, env.options())
    job.committer.setup_job()
    results = []
    for task in range(tasks):
        attempt = job.committer.task_attempt(task, 0)
        attempt.setup_task()
        for index in range(task, files, tasks):
            with attempt.create_file(
                f"dt=2024-{index % partitions:04d}/part-{task:05d}-{index:07d}.parquet"
            ) as out:
                out.write(b"x")
        results.append(attempt.commit_task(rows=files // tasks))
    success = job.committer.commit_job(results)

    raw = env.store.read_bytes(dest.join("_SUCCESS"))
    record = env.store.read_bytes(job.committer.layout.job_record)
    head = SuccessData.read_head(env.store, dest.join("_SUCCESS"))
    assert head.read_fields is None  # the whole file fits in one sensor read
    assert (head.file_count, head.rows, head.partition_count) == (files, files, partitions)
    assert len(head.partitions) == PARTITIONS_LIMIT and head.partition_list is not None
    assert head.file_list is not None and head.file_list.entries == files
    assert len(head.filenames) == FILENAMES_LIMIT
    listed = [entry.uri for entry in iter_file_list(env.store, dest, head.file_list)]
    keys = [StorePath.from_uri(uri).key for uri in listed]
    assert len(set(keys)) == files and keys == sorted(keys, key=lambda key: key.encode())
    assert head.filenames == listed[:FILENAMES_LIMIT]
    stats = dict(iter_partitions(env.store, dest, head.partition_list))
    assert len(stats) == partitions and sum(s.files for s in stats.values()) == files
    assert success.file_list == head.file_list
    return raw, record


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_success_of_a_job_is_the_same_few_kib_at_ten_times_the_files(commit_env: CommitEnv) -> None:
    """The issue's case: 200k files over `dt=` partitions wrote a 27.4 MB `_SUCCESS`. Now `_SUCCESS`
    and the record are about 12 KiB whatever the job wrote: at 2k files and at 20k they are the
    same bytes but for the numbers that count (`bench/` measures 1M files)."""
    partitions = 250
    small_success, small_record = _committed_job(commit_env, 2_000, partitions)
    raw, record = _committed_job(commit_env, 20_000, partitions)
    assert _without_numbers(raw) == _without_numbers(small_success)
    assert _without_numbers(record) == _without_numbers(small_record)
    # Hadoop's 100 `filenames` (about 90 bytes each here) are most of it, whatever the job wrote.
    assert len(raw) < 16 * 1024, f"_SUCCESS of 20k files is {len(raw)} bytes"
    assert len(record) < 32 * 1024, f"the job record of 20k files is {len(record)} bytes"
    assert len(raw) < SENSOR_READ_BYTES


@pytest.mark.parametrize("name", ["partitioned", "manifest"])
def test_lists_are_written_before_the_commit_point_and_named_by_the_outcome(
    commit_env: CommitEnv, name: str
) -> None:
    """Crash right after the decision: the outcome names lists that are already stored, whole; the
    roll-forward by another process writes those references into `_SUCCESS`, the record and the
    markers, and writes no list again."""
    env = commit_env
    if name == "manifest" and env.kind == "s3":
        pytest.skip("the manifest committer refuses S3 (no atomic rename)")
    job, attempts = _partitioned_job(env, name)
    dying = FaultInjectingStore(env.store)
    dying.inject(when=lambda call: call.path.endswith(".outcome.json") and call.mutating, mode="crash_after")
    with pytest.raises(SimulatedCrash):
        create_committer(name, dying, env.dest, job.job_id, env.options()).commit_job(
            [a.result for a in attempts]
        )
    outcome = _outcome(env.store, job)
    assert outcome.committing and outcome.file_list is not None and outcome.partition_list is not None
    assert outcome.file_list.entries == sum(len(a.files) for a in attempts)
    assert outcome.partition_list.entries == PARTITIONS
    stored = _lists(env.store, env.dest, job.job_id)
    assert stored == sorted([outcome.file_list.path, outcome.partition_list.path])
    assert "_SUCCESS" not in store_files(env.store, env.dest), "nothing is finished before the roll-forward"

    watching = FaultInjectingStore(env.store)
    finished = create_committer(name, watching, env.dest, job.job_id, env.options()).commit_job(None)
    rewritten = [
        call for call in watching.calls if call.mutating and f"/{RECORDS_DIR}/{job.job_id}/" in call.path
    ]
    assert rewritten == [], f"the roll-forward wrote lists again: {rewritten}"
    assert (finished.file_list, finished.partition_list) == (outcome.file_list, outcome.partition_list)
    success = assert_committed(env.store, env.dest, expected_output(*attempts), job_id=job.job_id)
    assert (success.file_list, success.partition_list) == (outcome.file_list, outcome.partition_list)
    assert success.partition_count == PARTITIONS and len(success.partitions) == PARTITIONS_LIMIT
    assert _lists(env.store, env.dest, job.job_id) == stored, "a committed job's lists stay"


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_roll_forward_writes_a_lost_or_damaged_list_again(commit_env: CommitEnv, damage: str) -> None:
    """The manifests give the same list, byte for byte, so its name (its SHA-256) is the same."""
    env = commit_env
    job, attempts = _partitioned_job(env)
    dying = FaultInjectingStore(env.store)
    dying.inject(when=lambda call: call.path.endswith(".outcome.json") and call.mutating, mode="crash_after")
    with pytest.raises(SimulatedCrash):
        create_committer("partitioned", dying, env.dest, job.job_id, env.options()).commit_job(
            [a.result for a in attempts]
        )
    outcome = _outcome(env.store, job)
    assert outcome.file_list is not None
    location = outcome.file_list.path_under(env.dest)
    if damage == "deleted":
        env.store.delete(location)
    else:
        env.store.write_bytes(location, env.store.read_bytes(location)[:100])
    job.committer.commit_job(None)
    success = assert_committed(env.store, env.dest, expected_output(*attempts), job_id=job.job_id)
    assert success.file_list == outcome.file_list
    assert len(list(iter_file_list(env.store, env.dest, outcome.file_list))) == outcome.file_list.entries


def test_a_swapped_or_corrupt_file_list_is_refused_naming_it(commit_env: CommitEnv) -> None:
    """Another job's list put in place of this one's, or this one's with a byte changed: every
    reader (and a roll-forward) refuses it, naming the file, by its bytes, SHA-256 or rows."""
    env = commit_env
    other = JobRun.create("partitioned", env.store, env.root.join("other"), env.options())
    other.committer.setup_job()
    other_success = other.committer.commit_job([other.run_task(0, 0, ["dt=1/x.bin"]).result])
    job, attempts = _partitioned_job(env)
    success = job.committer.commit_job([a.result for a in attempts])
    assert success.file_list is not None and other_success.file_list is not None
    location = success.file_list.path_under(env.dest)
    good = env.store.read_bytes(location)
    swapped = env.store.read_bytes(other_success.file_list.path_under(other.dest))
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x55
    for bad in (swapped, bytes(flipped), good + b"\0"):
        env.store.write_bytes(location, bad)
        with pytest.raises(InvalidCommitDataError) as caught:
            list(success.iter_all_files(env.store, env.dest))
        assert str(location) in str(caught.value)
        marker = env.dest.join("dt=000")
        marker_success = SuccessData.from_bytes(env.store.read_bytes(marker.join("_SUCCESS")), "marker")
        with pytest.raises(InvalidCommitDataError, match=str(location).replace("+", r"\+")):
            list(marker_success.iter_all_files(env.store, marker))


@pytest.mark.parametrize("how", ["aborted-after-its-lists", "fenced-while-committing", "never-decided"])
def test_a_job_that_does_not_commit_leaves_no_lists(commit_env: CommitEnv, how: str) -> None:
    env = commit_env
    job, attempts = _partitioned_job(env)
    results = [a.result for a in attempts]
    failing = FaultInjectingStore(env.store)
    if how == "fenced-while-committing":
        # Another process aborts the job between its lists and its decision: the abort wins.
        def fence(call: object) -> None:
            if getattr(call, "path", "").endswith(".outcome.json") and getattr(call, "mutating", False):
                failing.on_call = None
                create_committer("partitioned", env.store, env.dest, job.job_id, env.options()).abort_job(
                    "fence"
                )

        failing.on_call = fence  # type: ignore[assignment]
        with pytest.raises(Exception, match="aborted"):
            create_committer("partitioned", failing, env.dest, job.job_id, env.options()).commit_job(results)
    else:
        failing.inject(when=lambda call: call.path.endswith(".outcome.json") and call.mutating, mode="crash")
        with pytest.raises(SimulatedCrash):
            create_committer("partitioned", failing, env.dest, job.job_id, env.options()).commit_job(results)
        assert len(_lists(env.store, env.dest, job.job_id)) == 2, "the lists were written before the decision"
        if how == "aborted-after-its-lists":
            assert job.committer.abort_job("the try failed") is None
        else:
            job.committer.cleanup_job()
    assert _lists(env.store, env.dest, job.job_id) == []
    assert_aborted(env.store, env.dest)


def test_registration_counts_every_partition_past_the_inline_cap(commit_env: CommitEnv) -> None:
    """A table write of more partitions than `_SUCCESS` lists inline registers them all, read from
    the partition list, and its record says how many."""
    from airflow_commit_provider.core.catalog import Partition, register_committed

    env = commit_env
    registered: list[Partition] = []

    class Catalog:
        def register_partitions(self, name: str, partitions: object) -> None:
            registered.extend(partitions)  # type: ignore[call-overload]

    job = JobRun.create("partitioned", env.store, env.dest, env.options(table="db.t"))
    job.committer.setup_job()
    attempt = job.run_task(0, 0, [f"dt={p:03d}/a.bin" for p in range(PARTITIONS)])
    record = job.committer.commit_job([attempt.result])
    assert record.registration_pending
    done = register_committed(
        Catalog(),
        env.store,
        env.dest,
        record,
        lambda path: (("dt", path.split("=")[1]),),  # type: ignore[arg-type]
    )
    assert sorted(p.values[0][1] for p in registered) == [f"{p:03d}" for p in range(PARTITIONS)]
    assert done.registered_partition_count == PARTITIONS and not done.registration_pending
    raw = json.loads(env.store.read_bytes(job.committer.layout.job_record))
    assert raw["registeredPartitionCount"] == PARTITIONS
    assert len(raw["registeredPartitions"]) == PARTITIONS_LIMIT
