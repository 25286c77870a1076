"""The seeds' correctness properties, for every committer, on the local filesystem and on S3.

Each property is a property of the protocol the committers share, so it runs once per committer,
on one store (`support.workload.one_store_each`): the tests take the S3-first and the local-first
assignment in turn, so every committer meets both stores and every property both stores. What
the stores themselves must do is tests/core/test_store_contract.py's.

complete, exclusive, concurrent task commits, abortable (task and job), continuity of
correctness, and "what to commit never comes from a listing alone"; plus exclusive task commit
with adoption (the HADOOP-17258 trap avoided) and unique job IDs (two jobs, one destination).

file-v2 is run where it holds; where it does not (abort after task commit, mixed output),
`test_commit_file_v2.py` shows the failure explicitly.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.faults import FaultInjectingStore, StoreCall
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import (
    assert_aborted,
    assert_committed,
    assert_nothing_left_behind,
    pending_uploads,
    store_files,
)
from support.workload import (
    ALL_COMMITTERS,
    CORRECT_COMMITTERS,
    EXCLUSIVE_COMMITTERS,
    UPLOAD_COMMITTERS,
    JobRun,
    each_committer_once,
    each_committer_per_variant,
    expected_output,
    payload,
    skip_unsupported,
    task_files,
    write_files,
)

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.stages.errors import (
    InvalidCommitDataError,
    JobNotActiveError,
    MissingManifestError,
)
from airflow_commit_provider.core.stages.uploads import recorded_uploads


def start_job(env: CommitEnv, name: str, **options: object) -> JobRun:
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options(**options))
    job.committer.setup_job()
    return job


def job_files(env: CommitEnv) -> dict[str, bytes]:
    """Everything under the destination, machinery included (for before/after comparisons)."""
    return store_files(env.store, env.dest)


# Complete and exclusive ----------------------------------------------------------------------------
@each_committer_once(ALL_COMMITTERS)
def test_complete_and_exclusive(commit_env: CommitEnv, name: str) -> None:
    """Output is exactly the committed attempts' files: failed, crashed and losing attempts add nothing."""
    env = commit_env
    job = start_job(env, name)
    # task 0: attempt 0 fails before commit and is aborted; attempt 1 commits
    failed = job.attempt(0, 0, [*task_files(0), "dt=2024-01-09/only-in-failed-attempt.bin"])
    failed.handle.abort_task()
    t0 = job.run_task(0, 1)
    # task 1: attempt 0 dies mid-write (one file closed, one stream left open, no abort); attempt 1 commits
    crashed = job.committer.task_attempt(1, 0)
    crashed.setup_task()
    with crashed.create_file("dt=2024-01-01/part-00001-0.bin") as stream:
        stream.write(payload(job.job_id, 1, 0, "closed-before-crash"))
    left_open = crashed.create_file("dt=2024-01-02/part-00001-1.bin")
    left_open.write(b"half written by a dead attempt")
    t1 = job.run_task(1, 1)
    # task 2: attempt 0 commits; a speculative attempt 1 (with an extra file) finishes later
    t2 = job.run_task(2, 0)
    speculative = job.attempt(2, 1, [*task_files(2), "dt=2024-01-09/extra-from-speculative.bin"])
    if name in EXCLUSIVE_COMMITTERS:
        adopted = job.commit(speculative)
        assert adopted.adopted_from == speculative.attempt_id
        assert adopted.task_attempt_id == t2.attempt_id
    else:
        speculative.handle.abort_task()  # the engine's commit coordinator refuses a second committer
    success = job.committer.commit_job([t0.result, t1.result, t2.result])
    expected = expected_output(t0, t1, t2)
    assert_committed(env.store, env.dest, expected, job_id=job.job_id)
    assert success.file_count == len(expected) == 6
    # only the dead attempt's executor-local staging files remain (no engine call reached it)
    assert {leftover.split("/")[1] for leftover in env.staging_leftovers()} <= {crashed.task_attempt_id}


@each_committer_once(ALL_COMMITTERS, first="local")
def test_empty_tasks_and_empty_job(commit_env: CommitEnv, name: str) -> None:
    """Tasks with no files commit; a job with zero files commits cleanly and writes its _SUCCESS."""
    env = commit_env
    job = start_job(env, name)
    empty = job.attempt(0, 0, [])
    assert not empty.handle.needs_task_commit()
    assert job.attempt(1, 0).handle.needs_task_commit()  # written but never committed: not output
    result = job.commit(empty)
    assert (result.files, result.bytes) == (0, 0)
    success = job.committer.commit_job([result])
    assert_committed(env.store, env.dest, {}, job_id=job.job_id)
    assert success.file_count == 0

    other = JobRun.create(name, env.store, env.root.join("nothing"), env.options())
    other.committer.setup_job()
    other.committer.commit_job([])
    assert_committed(env.store, env.root.join("nothing"), {}, job_id=other.job_id)


# Concurrent task commits -----------------------------------------------------------------------------
@each_committer_once(ALL_COMMITTERS)
def test_concurrent_task_commits(commit_env: CommitEnv, name: str) -> None:
    """Many tasks commit at once; for exclusive committers, so do rival attempts of the same task."""
    env = commit_env
    job = start_job(env, name)
    attempts = [job.attempt(task, 0) for task in range(6)]
    if name in EXCLUSIVE_COMMITTERS:
        attempts += [job.attempt(task, 1) for task in range(3)]  # rivals for tasks 0-2
    barrier = threading.Barrier(len(attempts))

    def commit(attempt):  # type: ignore[no-untyped-def]
        barrier.wait()
        return job.commit(attempt)

    with ThreadPoolExecutor(len(attempts)) as pool:
        results = list(pool.map(commit, attempts))
    winners = {}
    for attempt, result in zip(attempts, results, strict=True):
        if result.adopted_from is None:
            assert result.task_attempt_id == attempt.attempt_id
            assert attempt.task not in winners, f"two winners for task {attempt.task}"
            winners[attempt.task] = attempt
    assert sorted(winners) == list(range(6))
    for attempt, result in zip(attempts, results, strict=True):
        assert result.task_attempt_id == winners[attempt.task].attempt_id
        if result.adopted_from is not None:
            assert result.adopted_from == attempt.attempt_id
    job.committer.commit_job([winners[task].result for task in range(6)])
    assert_committed(env.store, env.dest, expected_output(*winners.values()), job_id=job.job_id)


# Abortable -------------------------------------------------------------------------------------------
PREEXISTING = {"dt=2023-12-31/old.bin": b"written by an earlier job", "top-level.bin": b"also older"}


@each_committer_once(CORRECT_COMMITTERS, first="local")
def test_abort_job_leaves_nothing(commit_env: CommitEnv, name: str) -> None:
    """After abort and cleanup: no output, no pending upload, no temp object; older files untouched."""
    env = commit_env
    skip_unsupported(name, env.store)
    for relative, data in PREEXISTING.items():
        env.store.write_bytes(env.dest.join(relative), data)
    job = start_job(env, name)
    job.run_task(0, 0)  # committed task
    job.run_task(1, 0)
    job.attempt(1, 1)  # speculative attempt, never committed
    job.attempt(2, 0)  # written, not committed
    mid_write = job.committer.task_attempt(3, 0)
    mid_write.setup_task()
    stream = mid_write.create_file("dt=2024-01-01/part-00003-0.bin")
    stream.write(b"an attempt still writing when the job is aborted")
    job.committer.abort_job()
    job.committer.cleanup_job()
    assert_aborted(env.store, env.dest, PREEXISTING)


@each_committer_once(ALL_COMMITTERS)
def test_abort_job_before_any_commit(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    job = start_job(env, name)
    job.attempt(0, 0)
    job.committer.abort_job()
    assert_aborted(env.store, env.dest)
    with pytest.raises(JobNotActiveError, match=job.job_id):
        job.committer.commit_job([])


@each_committer_once(ALL_COMMITTERS, first="local")
def test_abort_task_discards_the_attempt(commit_env: CommitEnv, name: str) -> None:
    """An aborted attempt leaves no upload and no file but its note (for the job record); the job
    still commits the other attempts."""
    env = commit_env
    job = start_job(env, name)
    machinery_before = set(job_files(env))
    aborted = job.attempt(0, 0, [*task_files(0), "dt=2024-01-09/only-aborted.bin"])
    aborted.handle.abort_task()
    assert pending_uploads(env.store, env.dest) == []
    note = job.committer.layout.attempt_note(aborted.attempt_id).relative_to(env.dest)
    assert set(job_files(env)) == machinery_before | {note}, "abort_task left files behind"
    assert not any(aborted.attempt_id in leftover for leftover in env.staging_leftovers())
    aborted.handle.abort_task()  # aborting twice is harmless
    retry = job.run_task(0, 1)
    job.committer.commit_job([retry.result])
    assert_committed(env.store, env.dest, retry.files, job_id=job.job_id)


@each_committer_once(ALL_COMMITTERS)
def test_abort_task_after_its_commit_keeps_the_committed_output(commit_env: CommitEnv, name: str) -> None:
    """An engine may abort an attempt whose commit reached the store but whose reply was lost.

    The task is committed: aborting must not destroy the output a retry will adopt.
    """
    env = commit_env
    job = start_job(env, name)
    first = job.run_task(0, 0)
    first.handle.abort_task()
    retry = job.attempt(0, 1)
    result = job.commit(retry)
    job.committer.commit_job([result])
    winner = first if name in EXCLUSIVE_COMMITTERS else retry
    assert_committed(env.store, env.dest, winner.files, job_id=job.job_id)


# Continuity of correctness ---------------------------------------------------------------------------
@each_committer_once(ALL_COMMITTERS, first="local")
def test_late_commit_after_job_commit_changes_nothing(commit_env: CommitEnv, name: str) -> None:
    """A partitioned attempt that commits after the job committed changes nothing visible."""
    env = commit_env
    job = start_job(env, name)
    t0 = job.run_task(0, 0)
    t1 = job.run_task(1, 0)
    # Partitioned from the driver before job commit: a rival of task 0 and a duplicate of task 1
    zombie0 = job.attempt(0, 1, [*task_files(0), "dt=2024-01-09/zombie-extra.bin"])
    zombie1 = job.attempt(1, 1)
    job.committer.commit_job([t0.result, t1.result])
    committed = job_files(env)
    with pytest.raises(JobNotActiveError, match=job.job_id):
        zombie0.handle.commit_task()
    # a zombie that keeps writing after the job committed, then commits
    with zombie1.handle.create_file("dt=2024-01-09/written-after-job-commit.bin") as stream:
        stream.write(b"late")
    with pytest.raises(JobNotActiveError):
        zombie1.handle.commit_task()
    # one that only starts after the job is over: task setup refuses it (as Hadoop's does) ...
    newcomer = job.committer.task_attempt(2, 0)
    with pytest.raises(JobNotActiveError):
        newcomer.setup_task()
    # ... and if it writes anyway, its commit is refused
    with newcomer.create_file("dt=2024-01-09/newcomer.bin") as stream:
        stream.write(b"too late")
    with pytest.raises(JobNotActiveError):
        newcomer.commit_task()
    for late in (zombie0.handle, zombie1.handle, newcomer):
        late.abort_task()
    assert job_files(env) == committed
    assert_committed(env.store, env.dest, expected_output(t0, t1), job_id=job.job_id)


@each_committer_once(ALL_COMMITTERS)
def test_late_commit_discards_its_output_without_abort(commit_env: CommitEnv, name: str) -> None:
    """A late attempt whose commit is refused discards its own output (no engine abort needed)."""
    env = commit_env
    job = start_job(env, name)
    t0 = job.run_task(0, 0)
    zombie = job.attempt(0, 1, [*task_files(0), "dt=2024-01-09/zombie-extra.bin"])
    job.committer.commit_job([t0.result])
    with zombie.handle.create_file("dt=2024-01-09/after.bin") as stream:
        stream.write(b"late")
    with pytest.raises(JobNotActiveError):
        zombie.handle.commit_task()
    assert_committed(env.store, env.dest, t0.files, job_id=job.job_id)


@each_committer_once(ALL_COMMITTERS, first="local")
def test_late_commit_after_job_abort_changes_nothing(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    job = start_job(env, name)
    zombie = job.attempt(0, 0)
    job.committer.abort_job()
    with pytest.raises(JobNotActiveError):
        zombie.handle.commit_task()
    assert_aborted(env.store, env.dest)


def zombie_commit_racing_job_commit(env: CommitEnv, name: str, dest, duplicate: bool, at: int | None):  # type: ignore[no-untyped-def]
    """Run a zombie's task commit; at its mutating call number `at`, the whole job commit runs.

    Returns (job, the reported attempt, the zombie's store calls).
    """
    job = JobRun.create(name, env.store, dest, env.options(threads=1))
    job.committer.setup_job()
    reported = job.run_task(0, 0, ["dt=1/part-0.bin"])
    store = FaultInjectingStore(env.store)
    zombie_side = create_committer(name, store, dest, job.job_id, job.committer.options)
    zombie = zombie_side.task_attempt(0 if duplicate else 1, 1)
    zombie.setup_task()
    write_files(zombie, {"dt=1/part-0.bin" if duplicate else "dt=5/zombie.bin": b"zombie output"})
    start = store.call_count
    mutating: list[StoreCall] = []
    job_errors: list[Exception] = []

    def interleave(call: StoreCall) -> None:
        if call.index < start or not call.mutating:
            return
        mutating.append(call)
        if len(mutating) - 1 == at:
            try:
                job.committer.commit_job([reported.result])
            except Exception as error:
                job_errors.append(error)

    store.on_call = interleave
    try:
        zombie.commit_task()
    except Exception:  # refused (JobNotActiveError) or broken by the cleanup under it: it is dead
        store.on_call = None
        with contextlib.suppress(Exception):
            zombie.abort_task()  # what the engine does with a failed task attempt, if it can
    if job_errors:
        raise job_errors[0]
    return job, reported, mutating


@each_committer_per_variant(
    "duplicate",
    [(True, "duplicate-of-reported-task", "s3"), (False, "unreported-task", "local")],
    CORRECT_COMMITTERS,
)
def test_task_commit_racing_the_whole_job_commit(commit_env: CommitEnv, name: str, duplicate: bool) -> None:
    """A zombie's task commit is interleaved with the complete job commit and cleanup at each of its
    store writes: whichever step the job ends at, nothing of the zombie is visible or left behind.

    file-v1 needs the engine's commit coordinator to keep a second attempt of a reported task from
    committing at all (its task commit replaces the committed task directory), so it runs only the
    unreported-task zombie; see test_file_v1_needs_the_commit_coordinator.
    """
    env = commit_env
    skip_unsupported(name, env.store)
    if name == "file-v1" and duplicate:
        pytest.skip("file-v1 relies on the commit coordinator here (see the docstring)")
    _job, _reported, writes = zombie_commit_racing_job_commit(
        env, name, env.root.join("dry"), duplicate, None
    )
    failures = []
    for at in range(len(writes)):
        dest = env.root.join(f"race{at}")
        job, reported, _ = zombie_commit_racing_job_commit(env, name, dest, duplicate, at)
        try:
            assert_committed(env.store, dest, reported.files, job_id=job.job_id)
        except AssertionError as error:
            failures.append(f"job committed before zombie write #{at} ({writes[at]}): {error}")
    assert not failures, "\n".join(failures)


def test_file_v1_needs_the_commit_coordinator(commit_env: CommitEnv) -> None:
    """file-v1's last-attempt-wins task commit replaces the committed task directory. A second
    attempt of a reported task committing while the job commits (which Spark's commit coordinator
    forbids) makes the job commit refuse, before its commit point, naming the manifest and the file
    it no longer finds, instead of writing wrong output.
    """
    env = commit_env
    with pytest.raises(InvalidCommitDataError, match="is not in the job's directory"):
        zombie_commit_racing_job_commit(env, "file-v1", env.dest, duplicate=True, at=1)
    assert "_SUCCESS" not in store_files(env.store, env.dest)


#: Steps of a job's cleanup, each a predicate on a store call and the job's ID.
CLEANUP_POINTS = {
    "before-marker-delete": lambda call, _: call.op == "delete" and call.path.endswith("/job.json"),
    "before-upload-records-listing": lambda call, _: (
        call.op == "list_files" and call.path.endswith("/uploads")
    ),
    # the job's own directory, named by its ID, not a task's or an attempt's inside it
    "before-tree-delete": lambda call, job_id: (
        call.op == "delete_tree" and call.path.rstrip("/").endswith(job_id)
    ),
}


@pytest.mark.parametrize("point", list(CLEANUP_POINTS))
@each_committer_per_variant(
    "finish", [("commit", "commit", "s3"), ("abort", "abort", "local")], CORRECT_COMMITTERS
)
def test_attempt_committing_during_job_cleanup_leaves_nothing(
    commit_env: CommitEnv, name: str, finish: str, point: str
) -> None:
    """A zombie attempt commits at a chosen step of the job's cleanup (interleaved exactly there).

    Its task is not in the driver's list, so nothing of it may stay: no output, no pending upload.
    Before the job marker goes it still wins its task commit; after that it is refused.
    """
    env = commit_env
    if point == "before-upload-records-listing" and name not in UPLOAD_COMMITTERS:
        pytest.skip("only the upload committers record uploads")
    job = start_job(env, name)
    t0 = job.run_task(0, 0)
    zombie = job.committer.task_attempt(1, 0)
    zombie.setup_task()
    store = FaultInjectingStore(env.store)
    outcome: list[str] = []

    def interleave(call: StoreCall) -> None:
        if not outcome and CLEANUP_POINTS[point](call, job.job_id):
            write_files(zombie, {"dt=5/zombie.bin": b"zombie output"})
            try:
                zombie.commit_task()
                outcome.append("committed")
            except JobNotActiveError:
                outcome.append("refused")

    store.on_call = interleave
    committer = create_committer(name, store, env.dest, job.job_id, job.committer.options)
    if finish == "commit":
        committer.commit_job([t0.result])
    else:
        committer.abort_job()
    assert outcome == (["committed"] if point == "before-marker-delete" else ["refused"])
    if finish == "commit":
        assert_committed(env.store, env.dest, t0.files, job_id=job.job_id)
    else:
        assert_aborted(env.store, env.dest)


# What to commit never comes from a listing alone -----------------------------------------------------
@each_committer_once(CORRECT_COMMITTERS)
def test_job_commits_only_the_reported_tasks(commit_env: CommitEnv, name: str) -> None:
    """A task committed in the store but not reported by the driver is not committed by the job."""
    env = commit_env
    job = start_job(env, name)
    reported = job.run_task(0, 0)
    job.run_task(1, 0)  # committed in the store, but the driver does not report it
    stray = job.committer.layout.job_attempt_dir.join("manifests", "task_stray_m_000009-manifest.json")
    env.store.write_bytes(stray, b"not even JSON")  # listings would find it; job commit must not look
    job.committer.commit_job([reported.result])
    assert_committed(env.store, env.dest, reported.files, job_id=job.job_id)


@each_committer_once(ALL_COMMITTERS, first="local")
def test_reported_task_without_manifest_is_an_error(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    job = start_job(env, name)
    done = job.run_task(0, 0)
    other = job.run_task(1, 0)
    env.store.delete(job.committer.layout.manifest_path(other.handle.task_id))
    with pytest.raises(MissingManifestError, match=other.handle.task_id) as caught:
        job.committer.commit_job([done.result, other.result])
    assert f"{other.handle.task_id}-manifest.json" in str(caught.value)
    job.committer.abort_job()
    if name == "file-v2":  # task commit already made the output visible; abort cannot take it back
        assert set(done.files) | set(other.files) <= set(job_files(env))
    else:
        assert_aborted(env.store, env.dest)


# Exclusive task commit, adoption (HADOOP-17258) ------------------------------------------------------
@each_committer_once(EXCLUSIVE_COMMITTERS)
def test_retry_of_a_committed_task_adopts_the_winner(commit_env: CommitEnv, name: str) -> None:
    """Attempt 0 commits but its reply is lost; the retry adopts it instead of failing forever."""
    env = commit_env
    job = start_job(env, name)
    first = job.run_task(0, 0)
    uploads_of_first = pending_uploads(env.store, env.dest)
    retry = job.attempt(0, 1, [*task_files(0), "dt=2024-01-09/retry-extra.bin"])
    result = job.commit(retry)
    assert result.adopted_from == retry.attempt_id
    assert result.task_attempt_id == first.attempt_id
    assert result.manifest == first.result.manifest
    assert (result.files, result.bytes) == (first.result.files, first.result.bytes)
    # the retry's own output is discarded at once; it leaves the note that it was refused
    assert pending_uploads(env.store, env.dest) == uploads_of_first
    note = job.committer.layout.attempt_note(retry.attempt_id).relative_to(env.dest)
    assert [relative for relative in job_files(env) if retry.attempt_id in relative] == [note]
    again = job.attempt(0, 2)
    assert job.commit(again).task_attempt_id == first.attempt_id  # and so does every later attempt
    job.committer.commit_job([result])
    assert_committed(env.store, env.dest, first.files, job_id=job.job_id)


def test_file_v1_last_attempt_wins(commit_env: CommitEnv) -> None:
    """file-v1 keeps Hadoop's semantics: a second committed attempt replaces the first."""
    env = commit_env
    job = start_job(env, "file-v1")
    job.run_task(0, 0)
    retry = job.run_task(0, 1)
    assert retry.result.adopted_from is None
    job.committer.commit_job([retry.result])
    assert_committed(env.store, env.dest, retry.files, job_id=job.job_id)


# Unique job IDs --------------------------------------------------------------------------------------
@each_committer_once(CORRECT_COMMITTERS)
def test_two_jobs_one_destination_do_not_interfere(commit_env: CommitEnv, name: str) -> None:
    """Two concurrent jobs with their own IDs write to one destination; neither harms the other."""
    env = commit_env
    a = start_job(env, name)
    b = start_job(env, name)
    a0 = a.run_task(0, 0, ["a/part-0.bin"])
    b0 = b.run_task(0, 0, ["b/part-0.bin"])
    b_pending = b.attempt(1, 0, ["b/part-1.bin"])
    a.committer.commit_job([a0.result])  # A's cleanup must not touch B's work
    a.committer.cleanup_job()
    b1 = b.commit(b_pending)
    b.committer.commit_job([b0.result, b1])
    assert_committed(
        env.store,
        env.dest,
        {**a0.files, **b0.files, **b_pending.files},
        job_id=b.job_id,
        committed={**b0.files, **b_pending.files},
    )


@each_committer_once(CORRECT_COMMITTERS, first="local")
def test_abort_of_one_job_spares_a_concurrent_job(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    victim = start_job(env, name)
    survivor = start_job(env, name)
    victim.run_task(0, 0, ["v/part-0.bin"])
    kept = survivor.run_task(0, 0, ["s/part-0.bin"])
    victim.committer.abort_job()
    survivor.committer.commit_job([kept.result])
    assert_committed(env.store, env.dest, kept.files, job_id=survivor.job_id)


@each_committer_once(CORRECT_COMMITTERS, first="local")
def test_sibling_prefix_jobs_commit_and_abort_concurrently(commit_env: CommitEnv, name: str) -> None:
    """`out/dataset1` and `out/dataset10` (the prefix bug): concurrent commit and abort stay apart."""
    env = commit_env
    skip_unsupported(name, env.store)
    one = JobRun.create(name, env.store, env.root.join("dataset1"), env.options())
    ten = JobRun.create(name, env.store, env.root.join("dataset10"), env.options())
    eleven = JobRun.create(name, env.store, env.root.join("dataset11"), env.options())
    for job in (one, ten, eleven):
        job.committer.setup_job()
    committed_one = one.run_task(0, 0)
    committed_ten = ten.run_task(0, 0)
    eleven.run_task(0, 0)
    barrier = threading.Barrier(3)

    def finish(job: JobRun, result):  # type: ignore[no-untyped-def]
        barrier.wait()
        if result is None:
            job.committer.abort_job()
        else:
            job.committer.commit_job([result])

    with ThreadPoolExecutor(3) as pool:
        futures = [
            pool.submit(finish, one, committed_one.result),
            pool.submit(finish, ten, committed_ten.result),
            pool.submit(finish, eleven, None),
        ]
        for future in futures:
            future.result()
    assert_committed(env.store, one.dest, committed_one.files, job_id=one.job_id)
    assert_committed(env.store, ten.dest, committed_ten.files, job_id=ten.job_id)
    assert_aborted(env.store, eleven.dest)
    assert_nothing_left_behind(env.store, env.root)


# Upload records ----------------------------------------------------------------------------------------
@each_committer_once(UPLOAD_COMMITTERS)
def test_committed_attempt_keeps_one_upload_record_naming_every_upload(
    commit_env: CommitEnv, name: str
) -> None:
    """Task commit leaves one record per attempt (job commit deletes one object per task, not per
    file), and that record still lets an abort find every upload of the committed task."""
    env = commit_env
    job = start_job(env, name)
    names = [f"dt=2024-01-0{i}/part-00000-{i}.bin" for i in range(1, 6)]
    committed = job.run_task(0, 0, names)
    records_dir = job.committer.layout.upload_records_dir(committed.attempt_id)
    assert len(list(env.store.list_files(records_dir))) == 1
    recorded = {
        path.relative_to(env.dest) for _attempt, path, _upload in recorded_uploads(job.committer.context)
    }
    assert recorded == set(names)
    assert len(pending_uploads(env.store, env.dest)) == len(names)
    job.committer.abort_job()
    assert_aborted(env.store, env.dest)
