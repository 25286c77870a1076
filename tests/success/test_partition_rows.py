"""Each partition's `_SUCCESS` has the rows the job wrote into it, summed over its tasks; a task
that did not count them (an older writer) leaves the partitions' rows unknown, never wrong."""

from __future__ import annotations

from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.workload import JobRun, payload, write_files

from airflow_commit_provider.success.check import load_success

#: Two tasks, each writing into both days: (task, files, rows per day it counted).
TASKS = (
    (0, ["dt=1/part-00000-a.bin", "dt=2/part-00000-b.bin"], {"dt=1": 7, "dt=2": 3}),
    (1, ["dt=1/part-00001-a.bin", "dt=2/part-00001-b.bin"], {"dt=1": 2, "dt=2": 11}),
)


def run(env: CommitEnv, counted: tuple[bool, bool]) -> JobRun:
    job = JobRun.create("partitioned", env.store, env.dest, env.options(conflict_mode="replace"))
    job.committer.setup_job()
    results = []
    for (task, names, rows), counts in zip(TASKS, counted, strict=True):
        attempt = job.committer.task_attempt(task, 0)
        attempt.setup_task()
        write_files(attempt, {name: payload(job.job_id, task, 0, name) for name in names})
        partition_rows = rows if counts else None
        results.append(attempt.commit_task(rows=sum(rows.values()), partition_rows=partition_rows))
    job.committer.commit_job(results)
    return job


def test_partition_markers_carry_their_partition_s_rows(commit_env: CommitEnv) -> None:
    run(commit_env, (True, True))
    assert load_success(commit_env.store, commit_env.dest.join("dt=1")).rows == 7 + 2
    assert load_success(commit_env.store, commit_env.dest.join("dt=2")).rows == 3 + 11
    assert load_success(commit_env.store, commit_env.dest).rows == 7 + 3 + 2 + 11


def test_a_task_without_counts_leaves_the_partitions_rows_unknown(commit_env: CommitEnv) -> None:
    run(commit_env, (True, False))
    assert load_success(commit_env.store, commit_env.dest.join("dt=1")).rows is None
    assert load_success(commit_env.store, commit_env.dest.join("dt=2")).rows is None
    assert load_success(commit_env.store, commit_env.dest).rows == 7 + 3 + 2 + 11
