"""An attempt's note, and every folder of its job's tree, never outlive its job (issue 28, "Also").

Continuity of correctness: a task attempt that wakes up after its job committed or aborted, or an
attempt of a job never set up at its destination, changes nothing. It writes no note for the job
record (that record is made, or there is none), and it recreates nothing of the job's
`_temporary/<job>` or `__magic_job-<job>` tree that cleanup removed: not a file on S3, not an
empty folder on local files. While the job is live an aborted attempt still leaves its note, and
job commit folds it into the record. For every committer, each on one of local files and the
embedded S3, the stores alternating between the tests (`support.workload.one_store_each`), so each
committer meets both.

Out of scope here: on local files an aborted multipart upload leaves the folder it was made in
(`LocalStore.abort_multipart_upload` removes only its `.__uploads__`), so a late magic attempt
that writes a partition no one else wrote leaves that partition's empty folder in the destination,
as a live aborted one does; outside the job's tree, so the late writes here stay in their partition.
"""

from __future__ import annotations

import os

import pytest
from support.faults import FaultInjectingStore, StoreCall
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_committed, store_files
from support.workload import (
    ALL_COMMITTERS,
    JobRun,
    each_committer_once,
    each_committer_per_variant,
    new_job_id,
    payload,
    skip_unsupported,
    write_files,
)

from airflow_commit_provider.core.committers import TaskAttempt, create_committer
from airflow_commit_provider.core.formats.attempts import FAILED, LostAttempt
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.layout import MAGIC_PREFIX, TEMPORARY_DIR
from airflow_commit_provider.core.stages.errors import JobNotActiveError

#: Store calls that create something (an object, an upload, a part, a folder).
CREATING = {
    "write_bytes",
    "write_bytes_if_absent",
    "open_write",
    "write_close",
    "rename_file",
    "prepare_directory",
    "create_multipart_upload",
    "upload_part",
    "complete_multipart_upload",
}


def start_job(env: CommitEnv, name: str) -> JobRun:
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    return job


def attempt_elsewhere(
    env: CommitEnv, job: JobRun, job_id: str, task: int
) -> tuple[FaultInjectingStore, TaskAttempt]:
    """Attempt 0 of `task` of job `job_id` at the job's destination, made by another process (an
    executor) whose store calls are logged."""
    store = FaultInjectingStore(env.store)
    committer = create_committer(job.name, store, env.dest, job_id, job.committer.options)
    return store, committer.task_attempt(task, 0)


def creating_calls(store: FaultInjectingStore, since: int) -> list[str]:
    return [str(call) for call in store.calls_since(since) if call.op in CREATING]


def is_machinery(relative: str) -> bool:
    return any(part == TEMPORARY_DIR or part.startswith(MAGIC_PREFIX) for part in relative.split("/"))


def local_dirs(env: CommitEnv) -> set[str]:
    """Local files: every folder under the test's root, relative to it (S3 has none)."""
    if env.kind != "local" or not os.path.isdir(env.root.key):
        return set()
    return {
        os.path.relpath(os.path.join(current, name), env.root.key)
        for current, dirs, _files in os.walk(env.root.key)
        for name in dirs
    }


def machinery_left(env: CommitEnv) -> list[str]:
    """Anything of any job's work under the whole store subtree: files under `_temporary` or a
    `__magic_job-` folder and, on local files, such folders even when empty."""
    files = [relative for relative in store_files(env.store, env.root) if is_machinery(relative)]
    return sorted(files + [f"{relative}/" for relative in local_dirs(env) if is_machinery(relative)])


def traces_of(env: CommitEnv, job_id: str) -> list[str]:
    """Files and (local) folders under the test's root whose path names job `job_id`."""
    files = [relative for relative in store_files(env.store, env.root) if job_id in relative]
    return sorted(files + [f"{relative}/" for relative in local_dirs(env) if job_id in relative])


def empty_local_dirs(env: CommitEnv) -> list[str]:
    return sorted(d for d in local_dirs(env) if not os.listdir(os.path.join(env.root.key, d)))


# A job never set up ----------------------------------------------------------------------------------
@each_committer_per_variant(
    "writes", [(False, "refused", "s3"), (True, "writes-anyway", "local")], ALL_COMMITTERS
)
def test_an_attempt_of_a_job_never_set_up_leaves_nothing(
    commit_env: CommitEnv, name: str, writes: bool
) -> None:
    """Job A is set up and one task commits; an attempt of job B, never set up at that destination,
    is refused at task setup and aborted (after writing and trying to commit anyway, in the second
    case): it leaves nothing, and once A commits nothing of any job's work is left."""
    env = commit_env
    job = start_job(env, name)
    committed = job.run_task(0, 0)
    store, stranger = attempt_elsewhere(env, job, new_job_id(), 0)
    with pytest.raises(JobNotActiveError, match=stranger.committer.job_id):
        stranger.setup_task()
    if writes:  # an engine that goes on regardless
        write_files(stranger, {"dt=2024-01-01/stranger.bin": b"written for a job never set up"})
        with pytest.raises(JobNotActiveError, match=stranger.committer.job_id):
            stranger.commit_task()
    since = store.call_count
    stranger.abort_task()
    if not writes:
        assert creating_calls(store, since) == [], "aborting an attempt of a job never set up wrote"
    assert traces_of(env, stranger.committer.job_id) == [], "the attempt left something of its job"
    job.committer.commit_job([committed.result])
    assert_committed(env.store, env.dest, committed.files, job_id=job.job_id)
    assert machinery_left(env) == []
    assert empty_local_dirs(env) == []


# A late attempt ------------------------------------------------------------------------------------
#: What a late attempt does once its job is over, before the engine aborts it.
LATE_STEPS = ("abort", "write-then-abort", "commit-then-abort")


@each_committer_per_variant("end", [("commit", "commit", "s3"), ("abort", "abort", "local")], ALL_COMMITTERS)
def test_a_late_attempt_changes_nothing(commit_env: CommitEnv, name: str, end: str) -> None:
    """Attempts set up and writing while their job is live wake up after the job committed (or
    aborted) and cleaned up: each is aborted, after writing more or having its commit refused
    first (one attempt per step in `LATE_STEPS`, one after the other, a task each). The store is
    left exactly as the job's end left it after every one, and a plain abort creates nothing even
    for a moment."""
    env = commit_env
    job = start_job(env, name)
    done = job.run_task(0, 0)
    late = {}
    for task, step in enumerate(LATE_STEPS, start=1):
        store, attempt = attempt_elsewhere(env, job, job.job_id, task)
        attempt.setup_task()
        write_files(attempt, {f"dt=2024-01-01/late-{task}.bin": payload(job.job_id, task, 0, "late.bin")})
        late[step] = (store, attempt)
    if end == "commit":
        job.committer.commit_job([done.result])
    else:
        job.committer.abort_job()
    assert machinery_left(env) == [], f"the job's {end} left its work behind"
    files, dirs = store_files(env.store, env.root), local_dirs(env)
    for step, (store, attempt) in late.items():
        since = store.call_count
        if step == "write-then-abort":  # into its own partition (see the module docstring)
            write_files(attempt, {"dt=2024-01-01/after-the-end.bin": b"written after the job ended"})
        elif step == "commit-then-abort":
            with pytest.raises(JobNotActiveError, match=job.job_id):
                attempt.commit_task()
        attempt.abort_task()
        if step != "write-then-abort":
            assert creating_calls(store, since) == [], f"{step}: an attempt of a job that is over wrote"
        assert machinery_left(env) == [], step
        assert store_files(env.store, env.root) == files, f"{step}: the late attempt changed the store"
        assert local_dirs(env) == dirs, f"{step}: the late attempt left folders"
    if end == "commit":
        assert_committed(env.store, env.dest, done.files, job_id=job.job_id)


# While the job is live -----------------------------------------------------------------------------
@each_committer_once(ALL_COMMITTERS)
def test_an_attempt_aborted_while_its_job_is_live_is_noted_and_folded_in(
    commit_env: CommitEnv, name: str
) -> None:
    """An attempt aborted with its job live notes that it failed; job commit folds the note into
    the job record before its cleanup removes it with the rest of the job's work."""
    env = commit_env
    job = start_job(env, name)
    failed = job.attempt(0, 0)
    failed.handle.abort_task()
    layout = job.committer.layout
    path = layout.attempt_note(failed.attempt_id)
    note = LostAttempt.from_note(env.store.read_bytes(path), str(path))
    assert (note.task_id, note.task_attempt_id, note.outcome, note.winner) == (
        layout.task_id(0),
        failed.attempt_id,
        FAILED,
        None,
    )
    retry = job.run_task(0, 1)
    job.committer.commit_job([retry.result])
    assert_committed(env.store, env.dest, retry.files, job_id=job.job_id)
    assert load_job_record(env.store, env.dest, job.job_id).lost_attempts == [note]
    assert machinery_left(env) == []
    assert empty_local_dirs(env) == []


@each_committer_per_variant(
    "moment",
    [("before-the-note", "before-the-note", "local"), ("after-the-note", "after-the-note", "s3")],
    ALL_COMMITTERS,
)
def test_a_note_written_as_the_job_ends_is_taken_back(commit_env: CommitEnv, name: str, moment: str) -> None:
    """The job commits, cleanup included, at the moment an aborted attempt writes its note (it saw
    the job live just before), or right after: the attempt takes the note back, with the folders
    its write recreated. Written before the job ended, the note is in the record all the same."""
    env = commit_env
    job = start_job(env, name)
    done = job.run_task(0, 0)
    store, failed = attempt_elsewhere(env, job, job.job_id, 1)
    failed.setup_task()
    write_files(failed, {"dt=2024-01-01/failed.bin": b"an attempt that fails"})
    note = job.committer.layout.attempt_note(failed.task_attempt_id)
    written: list[bool] = []

    def end_the_job_there(call: StoreCall) -> None:
        if call.op == "write_bytes" and call.path == str(note):
            written.append(True)
            if moment == "before-the-note":
                job.committer.commit_job([done.result])
        elif written and moment == "after-the-note" and call.op == "get_status" and len(written) == 1:
            written.append(True)
            job.committer.commit_job([done.result])

    store.on_call = end_the_job_there
    failed.abort_task()
    assert written, "the attempt wrote no note: the job was not live when it was aborted"
    assert_committed(env.store, env.dest, done.files, job_id=job.job_id)
    assert machinery_left(env) == []
    assert empty_local_dirs(env) == []
    lost = load_job_record(env.store, env.dest, job.job_id).lost_attempts or []
    noted = [(attempt.task_attempt_id, attempt.outcome) for attempt in lost]
    if moment == "after-the-note":
        assert noted == [(failed.task_attempt_id, FAILED)]
    else:  # no note reached the record (SeaweedFS still lists the emptied work folder: "killed")
        assert (failed.task_attempt_id, FAILED) not in noted
