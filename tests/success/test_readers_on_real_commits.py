"""The readers of issue 28 on what job commit really writes: a job of 300 files in 150 partitions
(past the 100 listed inline), committed by the partitioned committer on both stores, then checked
as the sensor checks it, verified file by file and reported, with the requests each costs."""

from __future__ import annotations

import pytest
from support.counting import CountingStore
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.workload import JobRun

from airflow_commit_provider.core.formats.success import PARTITIONS_LIMIT, SENSOR_READ_BYTES, SuccessData
from airflow_commit_provider.report.commit_report import load_commit
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.success.listed_files import check_listed_files

PARTITIONS = 150
NAMES = [f"dt={day:03d}/part-{index}.csv" for day in range(PARTITIONS) for index in range(2)]


@pytest.fixture
def committed(commit_env: CommitEnv) -> JobRun:
    job = JobRun.create("partitioned", commit_env.store, commit_env.dest, commit_env.options())
    job.committer.setup_job()
    attempts = [job.run_task(task, 0, NAMES[task::3]) for task in range(3)]
    job.committer.commit_job([attempt.result for attempt in attempts])
    return job


@pytest.mark.slow
def test_the_success_check_reads_the_head_and_looks_past_the_cap_in_the_partition_list(
    commit_env: CommitEnv, committed: JobRun
) -> None:
    env, job = commit_env, committed
    success = SuccessData.from_bytes(env.store.read_bytes(env.dest.join("_SUCCESS")), "_SUCCESS")
    assert success.file_list is not None and success.partition_list is not None
    assert success.total_partitions == PARTITIONS and len(success.partitions) == PARTITIONS_LIMIT

    counting = CountingStore(env.store)
    inline = SuccessExpectations(job_id=job.job_id, min_files=300, required_partitions=("dt=000",))
    assert inline.check(counting, env.dest).state == "accepted"
    assert counting.calls == {"read_range": 1} and counting.largest_read <= SENSOR_READ_BYTES

    counting.reset()
    past = SuccessExpectations(job_id=job.job_id, required_partitions=("dt=149", "dt=120"))
    found = past.check(counting, env.dest)
    assert found.state == "accepted", found.describe()
    assert counting.calls == {"read_range": 2}, "the head, then the partition list's tail"
    assert success.file_list.path_under(env.dest) not in counting.paths_read

    counting.reset()
    marker = SuccessExpectations(job_id=job.job_id, min_files=2).check(counting, env.dest.join("dt=149"))
    assert marker.state == "accepted" and counting.calls == {"read_range": 1}
    missing = SuccessExpectations(required_partitions=("dt=150",)).check(env.store, env.dest)
    assert (
        missing.state == "rejected"
        and "missing partitions: dt=150 (not among the 100 of 150" in missing.reasons[0]
    )


@pytest.mark.slow
def test_verify_files_and_the_report_read_the_file_list(commit_env: CommitEnv, committed: JobRun) -> None:
    env, job = commit_env, committed
    success = SuccessData.read_head(env.store, env.dest.join("_SUCCESS"))
    check = check_listed_files(env.store, success, env.dest, source="_SUCCESS")
    assert (check.ok, check.listed, check.unlisted) == (True, 300, 0)
    partition = env.dest.join("dt=149")
    marker = SuccessData.read_head(env.store, partition.join("_SUCCESS"))
    assert check_listed_files(env.store, marker, partition, source="marker").listed == 2

    report = load_commit(env.store, env.dest, job.job_id, page=2)
    assert (report.pages, report.listed_files, len(report.files_page)) == (3, 300, 100)
    assert [f.uri for f in report.files_page] == sorted(
        (env.dest.join(name).uri() for name in NAMES), key=lambda uri: uri.encode()
    )[200:]
