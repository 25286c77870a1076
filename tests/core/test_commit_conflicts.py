"""Conflict modes of the staging committers, on both stores.

partitioned: `replace` deletes existing files only in the partitions the job writes; `fail`
refuses when a partition it writes already has data (before anything becomes visible); `append`
adds. directory: the same over the whole destination (`fail` already at job setup).
Hidden files (`_SUCCESS`, `.x`, `_temporary` of other jobs) never count as output.
"""

from __future__ import annotations

import pytest
from support.faults import FaultInjectingStore, SimulatedCrash
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_aborted, assert_committed, store_files
from support.workload import CONFLICT_RESOLVING_COMMITTERS, JobRun

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.stages.errors import OutputConflictError

EXISTING = {
    "dt=1/old-a.bin": b"day 1, from yesterday's run",
    "dt=2/old-a.bin": b"day 2, old",
    "dt=2/old-b.bin": b"day 2, old too",
}
NEW_NAMES = ["dt=2/new-0.bin", "dt=3/new-0.bin"]


def seed(env: CommitEnv, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        env.store.write_bytes(env.dest.join(relative), data)


def run_job(env: CommitEnv, name: str, mode: str, names: list[str] = NEW_NAMES) -> tuple[JobRun, dict, list]:
    job = JobRun.create(name, env.store, env.dest, env.options(conflict_mode=mode))
    job.committer.setup_job()
    first = job.run_task(0, 0, names[:1])
    second = job.run_task(1, 0, names[1:])
    return job, {**first.files, **second.files}, [first.result, second.result]


# partitioned -------------------------------------------------------------------------------------
def test_partitioned_replace_only_touches_written_partitions(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "replace")
    success = job.committer.commit_job(results)
    expected = {"dt=1/old-a.bin": EXISTING["dt=1/old-a.bin"], **new}
    assert_committed(env.store, env.dest, expected, job_id=job.job_id, committed=new)
    assert sorted(success.partitions) == ["dt=2", "dt=3"]


def test_partitioned_replace_rerun_is_idempotent(commit_env: CommitEnv) -> None:
    """A daily job re-run (backfill) replaces its own day again and touches nothing else."""
    env = commit_env
    seed(env, EXISTING)
    for _ in range(2):
        job, new, results = run_job(env, "partitioned", "replace")
        job.committer.commit_job(results)
    assert_committed(
        env.store,
        env.dest,
        {"dt=1/old-a.bin": EXISTING["dt=1/old-a.bin"], **new},
        job_id=job.job_id,
        committed=new,
    )


def test_partitioned_fail_refuses_an_existing_partition(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, _new, results = run_job(env, "partitioned", "fail")
    with pytest.raises(OutputConflictError, match="dt=2/old-") as caught:
        job.committer.commit_job(results)
    assert "conflict_mode='fail'" in str(caught.value)
    visible = {k: v for k, v in store_files(env.store, env.dest).items() if not k.startswith("_")}
    assert visible == EXISTING, "a refused commit made output visible or changed existing files"
    job.committer.abort_job()
    assert_aborted(env.store, env.dest, EXISTING)


def test_partitioned_fail_accepts_new_partitions(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "fail", ["dt=3/new-0.bin", "dt=4/new-0.bin"])
    job.committer.commit_job(results)
    assert_committed(env.store, env.dest, {**EXISTING, **new}, job_id=job.job_id, committed=new)


def test_partitioned_append_adds(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "append", ["dt=2/new-0.bin", "dt=2/old-b.bin"])
    job.committer.commit_job(results)
    assert_committed(env.store, env.dest, {**EXISTING, **new}, job_id=job.job_id, committed=new)
    assert store_files(env.store, env.dest)["dt=2/old-b.bin"] == new["dt=2/old-b.bin"]  # same name: replaced


def test_partitioned_replace_resumes_after_a_crash_in_the_replace_step(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "replace")
    dying = FaultInjectingStore(env.store)
    dying.inject(when=lambda call: call.op == "delete_files", mode="crash")
    with pytest.raises(SimulatedCrash):
        create_committer("partitioned", dying, env.dest, job.job_id, job.committer.options).commit_job(
            results
        )
    create_committer("partitioned", env.store, env.dest, job.job_id, job.committer.options).commit_job(None)
    assert_committed(
        env.store,
        env.dest,
        {"dt=1/old-a.bin": EXISTING["dt=1/old-a.bin"], **new},
        job_id=job.job_id,
        committed=new,
    )


# directory ---------------------------------------------------------------------------------------
def test_directory_fail_refuses_at_setup_and_leaves_nothing(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    committer = create_committer(
        "directory", env.store, env.dest, "job-fail", env.options(conflict_mode="fail")
    )
    with pytest.raises(OutputConflictError, match="already holds") as caught:
        committer.setup_job()
    assert "dt=" in str(caught.value)
    assert_aborted(env.store, env.dest, EXISTING)


def test_directory_fail_refuses_output_that_appeared_after_setup(commit_env: CommitEnv) -> None:
    env = commit_env
    job, _new, results = run_job(env, "directory", "fail")
    seed(env, {"dt=9/someone-else.bin": b"written by another writer during the job"})
    with pytest.raises(OutputConflictError, match="someone-else"):
        job.committer.commit_job(results)
    job.committer.abort_job()
    assert_aborted(
        env.store, env.dest, {"dt=9/someone-else.bin": b"written by another writer during the job"}
    )


def test_directory_fail_ignores_hidden_files(commit_env: CommitEnv) -> None:
    env = commit_env
    hidden = {".hidden/x.bin": b"not output", "_logs/y.bin": b"not output either"}
    seed(env, hidden)
    job, new, results = run_job(env, "directory", "fail")
    job.committer.commit_job(results)
    assert_committed_with_hidden(env, job, {**new}, hidden)


def assert_committed_with_hidden(env: CommitEnv, job: JobRun, expected: dict, hidden: dict) -> None:
    files = store_files(env.store, env.dest)
    for relative, data in hidden.items():
        assert files.pop(relative) == data
        env.store.delete(env.dest.join(relative))
    assert_committed(env.store, env.dest, expected, job_id=job.job_id)


def test_directory_replace_replaces_everything_visible(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, {**EXISTING, "deep/er/file.bin": b"old"})
    hidden = {".keep": b"hidden files stay"}
    seed(env, hidden)
    job, new, results = run_job(env, "directory", "replace")
    job.committer.commit_job(results)
    assert_committed_with_hidden(env, job, new, hidden)


def test_directory_append_adds(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "directory", "append")
    job.committer.commit_job(results)
    assert_committed(env.store, env.dest, {**EXISTING, **new}, job_id=job.job_id, committed=new)


def test_unknown_conflict_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="conflict_mode 'overwrite'"):
        CommitOptions(conflict_mode="overwrite")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CONFLICT_RESOLVING_COMMITTERS)
def test_fail_mode_resume_does_not_trip_over_its_own_output(commit_env: CommitEnv, name: str) -> None:
    """A job commit in `fail` mode dies after making some files visible; resuming must not take
    the job's own files for somebody else's output."""
    env = commit_env
    job, new, results = run_job(env, name, "fail")
    completes: list[int] = []

    def second_complete(call) -> bool:  # type: ignore[no-untyped-def]
        if call.op == "complete_multipart_upload":
            completes.append(call.index)
        return len(completes) == 2

    dying = FaultInjectingStore(env.store)
    dying.inject(when=second_complete, mode="crash")
    options = env.options(conflict_mode="fail", threads=1)
    with pytest.raises(SimulatedCrash):
        create_committer(name, dying, env.dest, job.job_id, options).commit_job(results)
    assert 0 < len({k for k in store_files(env.store, env.dest) if not k.startswith("_")}) < len(new)
    create_committer(name, env.store, env.dest, job.job_id, options).commit_job(None)
    assert_committed(env.store, env.dest, new, job_id=job.job_id)
