"""file-v2's known failures, shown rather than hidden (the seeds' reason not to use it).

Task commit renames the attempt's files straight into the destination, one by one:
- a task commit that fails part way leaves *mixed output*: part of an uncommitted attempt is
  visible at once, and stays visible after a retry and the job commit;
- committed task output is observable before job commit, and aborting the job cannot undo it.
The same schedule with file-v1 (or any other committer) ends clean: the contrast is the point.
"""

from __future__ import annotations

import pytest
from support.faults import FaultInjectingStore, InjectedFault, StoreCall
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import (
    assert_aborted,
    assert_committed,
    is_commit_record,
    is_temp,
    read_success,
    store_files,
)
from support.workload import (
    COMMITTER_PARAMS,
    CORRECT_COMMITTER_PARAMS,
    JobRun,
    payload,
    skip_unsupported,
    write_files,
)

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.store.base import StoreError

FIRST = ["dt=1/part-00000-a.bin", "dt=1/part-00000-b.bin", "dt=2/part-00000-c.bin"]
RETRY = ["dt=1/part-00000-b.bin", "dt=2/part-00000-c.bin"]


def visible(env: CommitEnv) -> dict[str, bytes]:
    return {
        k: v
        for k, v in store_files(env.store, env.dest).items()
        if not is_temp(k) and not is_commit_record(k)
    }


def test_file_v2_failed_task_commit_leaves_mixed_output(commit_env: CommitEnv) -> None:
    env = commit_env
    store = FaultInjectingStore(env.store)
    job = JobRun.create("file-v2", store, env.dest, env.options())
    job.committer.setup_job()
    first = job.committer.task_attempt(0, 0)
    first.setup_task()
    write_files(first, {n: payload(job.job_id, 0, 0, n) for n in FIRST})
    renames: list[StoreCall] = []

    def second_rename(call: StoreCall) -> bool:
        if call.op == "rename_file":
            renames.append(call)
        return len(renames) == 2

    store.inject(when=second_rename, mode="before")
    with pytest.raises(StoreError):
        first.commit_task()
    # right after the failed task commit, part of the uncommitted attempt is already visible
    leaked = visible(env)
    assert len(leaked) == 1 and set(leaked) <= set(FIRST), leaked
    (stray,) = leaked
    assert b"attempt=0" in leaked[stray]
    first.abort_task()
    # the retry (a non-deterministic task) writes the other files; the job commits it
    retry = job.run_task(0, 1, [n for n in FIRST if n != stray])
    job.committer.commit_job([retry.result])
    final = visible(env)
    assert set(final) == set(FIRST), "the failed attempt's file is still there next to the retry's: mixed"
    assert b"attempt=0" in final[stray]
    assert all(b"attempt=1" in final[n] for n in retry.files)
    listed = {entry.uri for entry in read_success(env.store, env.dest).iter_all_files(env.store, env.dest)}
    assert env.dest.join(stray).uri() not in listed, "and _SUCCESS does not list the stray file"


@pytest.mark.parametrize("name", CORRECT_COMMITTER_PARAMS)
def test_same_failure_is_clean_with_the_other_committers(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    # learn the task commit's mutating calls on a dry run, then fail the middle one
    dry = FaultInjectingStore(env.store)
    dry_job = JobRun.create(name, dry, env.root.join("dry"), env.options(threads=1))
    dry_job.committer.setup_job()
    dry_attempt = dry_job.attempt(0, 0, FIRST)
    start = dry.call_count
    dry_job.commit(dry_attempt)
    mutating = [call.index - start for call in dry.calls_since(start) if call.mutating]
    offset = mutating[len(mutating) // 2]
    dry_job.committer.abort_job()

    store = FaultInjectingStore(env.store)
    job = JobRun.create(name, store, env.dest, env.options(threads=1))
    job.committer.setup_job()
    first = job.committer.task_attempt(0, 0)
    first.setup_task()
    write_files(first, {n: payload(job.job_id, 0, 0, n) for n in FIRST})
    store.inject(at=store.call_count + offset, mode="before")
    with pytest.raises(InjectedFault):
        first.commit_task()
    assert visible(env) == {}, "a failed task commit made output visible"
    first.abort_task()
    retry = job.run_task(0, 1, RETRY)
    job.committer.commit_job([retry.result])
    assert_committed(env.store, env.dest, retry.files, job_id=job.job_id)


def test_file_v2_committed_task_output_is_visible_and_abort_cannot_undo_it(commit_env: CommitEnv) -> None:
    env = commit_env
    job = JobRun.create("file-v2", env.store, env.dest, env.options())
    job.committer.setup_job()
    committed = job.run_task(0, 0)
    assert visible(env) == committed.files, "file-v2 publishes at task commit"
    job.committer.abort_job()
    job.committer.cleanup_job()
    assert visible(env) == committed.files, "the aborted job's committed task output stays visible"


@pytest.mark.parametrize("name", CORRECT_COMMITTER_PARAMS)
def test_committed_task_output_is_invisible_until_job_commit(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    job.run_task(0, 0)
    assert visible(env) == {}
    job.committer.abort_job()
    assert_aborted(env.store, env.dest)


def test_file_v2_zombie_racing_the_job_commit_publishes_into_the_committed_output(
    commit_env: CommitEnv,
) -> None:
    """Continuity of correctness fails: a zombie whose task commit runs just before the job's
    cleanup begins renames its files straight into the committed output (no job step can undo it)."""
    env = commit_env
    job = JobRun.create("file-v2", env.store, env.dest, env.options())
    job.committer.setup_job()
    reported = job.run_task(0, 0, ["dt=1/part-0.bin"])
    zombie = job.committer.task_attempt(1, 1)
    zombie.setup_task()
    write_files(zombie, {"dt=5/zombie.bin": b"zombie output"})
    store = FaultInjectingStore(env.store)

    def zombie_commits_when_cleanup_starts(call: StoreCall) -> None:
        if call.op == "delete" and call.path.endswith("/job.json") and store.on_call is not None:
            store.on_call = None
            zombie.commit_task()  # the job is still active: its check passes

    store.on_call = zombie_commits_when_cleanup_starts
    create_committer("file-v2", store, env.dest, job.job_id, job.committer.options).commit_job(
        [reported.result]
    )
    assert store.on_call is None, "the zombie never ran"
    assert read_success(env.store, env.dest).job_id == job.job_id
    assert visible(env) == {**reported.files, "dt=5/zombie.bin": b"zombie output"}


@pytest.mark.parametrize("name", COMMITTER_PARAMS)
def test_uncommitted_task_output_is_never_visible(commit_env: CommitEnv, name: str) -> None:
    """Written, closed, but not committed: no committer (file-v2 included) shows it to readers."""
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    job.attempt(0, 0)
    open_stream = job.committer.task_attempt(1, 0)
    open_stream.setup_task()
    stream = open_stream.create_file("dt=1/still-writing.bin")
    stream.write(b"half")
    assert visible(env) == {}
    job.committer.abort_job()
