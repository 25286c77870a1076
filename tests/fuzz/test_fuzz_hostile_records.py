"""Fuzz the protocol with hostile records (issue 21, item 2), on the local store and the embedded S3.

- Another job's records: a second job of the same committer, with a committed task (pending
  uploads, or files in its own work directory), writes to the same table; then its files (its
  manifest, upload records, job marker) and forged records of it under `_airflow_commit/` (outcome,
  job record) are replaced with fuzzed bytes. Our job then commits or aborts as if they were not
  there, and leaves every one of them, and every upload of that job, exactly as it was.
- A forged outcome: our own job's outcome file is replaced with fuzzed bytes (a commit or an
  abort of this job, damaged) before job commit reads it. Job commit then commits, or refuses with
  the documented error naming the file or the job; abort follows. Whatever stands in the end is
  all or nothing: committed (each visible file a committed task's, exactly what `_SUCCESS` lists)
  or aborted.

Either way nothing outside the destination is touched and no pending upload or temporary file of
our job is left.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.fuzzing import EXAMPLES, FUZZ, accepted_or_refused, count, stored_bytes
from support.invariants import (
    assert_aborted,
    assert_committed,
    is_temp,
    split_records,
    store_files,
)
from support.success_files import success
from support.workload import CORRECT_COMMITTER_PARAMS, Attempt, JobRun, expected_output, skip_unsupported

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.manifest import TaskManifest
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import job_state
from airflow_commit_provider.core.stages.errors import CommitError

STORES = ["local", pytest.param("s3", marks=pytest.mark.s3)]


def every_committer_on_both_stores(test: Callable[..., None]) -> Callable[..., None]:
    """Parametrize `test(commit_env, name)` over the stores and the correct committers."""
    return pytest.mark.parametrize("commit_env", STORES, indirect=True)(
        pytest.mark.parametrize("name", CORRECT_COMMITTER_PARAMS)(test)
    )


def run_examples(env: CommitEnv, name: str, case: Callable[[st.DataObject], None]) -> None:
    """Run `case` once per example. Each is whole jobs: a tenth of a parser's budget locally; on S3,
    where each is a few hundred requests (about a second), a hundredth, and at least 5."""
    skip_unsupported(name, env.store)
    examples_wanted = EXAMPLES // 10 if env.kind == "local" else max(EXAMPLES // 100, 5)
    examples = settings(FUZZ, max_examples=examples_wanted, suppress_health_check=list(HealthCheck))
    examples(given(data=st.data())(case))()


def our_job(env: CommitEnv, name: str, dest: StorePath) -> tuple[JobRun, list[Attempt]]:
    """Our job, set up with two committed tasks (three files), its job commit still to run."""
    job = JobRun.create(name, env.store, dest, env.options())
    job.committer.setup_job()
    return job, [job.run_task(0, 0, ["dt=1/a.bin", "dt=2/b.bin"]), job.run_task(1, 0, ["dt=1/c.bin"])]


def check_end_state(
    env: CommitEnv, job: JobRun, attempts: list[Attempt], root: StorePath, committed: bool
) -> None:
    """All or nothing for our job, and nothing written outside the destination."""
    if committed:
        visible = store_files(env.store, job.dest)
        split_records(visible)
        output = {relative: data for relative, data in visible.items() if not is_temp(relative)}
        expected = expected_output(*attempts)
        assert all(expected.get(relative) == data for relative, data in output.items()), sorted(output)
        assert_committed(env.store, job.dest, output, job_id=job.job_id)
    else:
        assert_aborted(env.store, job.dest)
    outside = sorted(key for key in store_files(env.store, root) if not key.startswith("out/"))
    assert not outside, f"written outside the destination: {outside}"


@every_committer_on_both_stores
def test_another_jobs_records_are_neither_trusted_nor_touched(commit_env: CommitEnv, name: str) -> None:
    env = commit_env

    def case(data: st.DataObject) -> None:
        root = env.fresh_root()
        dest = root.join("out")
        other = JobRun.create(name, env.store, dest, env.options())
        other.committer.setup_job()
        other_attempt = other.run_task(0, 0, ["dt=1/a.bin", "dt=3/o.bin"])  # a.bin: our name too
        forged = {
            other.committer.layout.outcome: JobOutcome(other.job_id, "commit", name, (other_attempt.result,)),
            other.committer.layout.job_record: success(dest, job_id=other.job_id),
        }
        for path, value in forged.items():
            env.store.write_bytes(path, value.to_bytes())
        theirs = sorted([*forged, *(s.path for s in env.store.list_files(other.committer.layout.job_dir))])
        for path in data.draw(st.lists(st.sampled_from(theirs), min_size=1, max_size=3, unique=True)):
            valid = env.store.read_bytes(path)
            env.store.write_bytes(path, data.draw(stored_bytes(valid, _document(valid)), label=str(path)))
        before = {path: env.store.read_bytes(path) for path in theirs}
        their_uploads = _pending(env, dest)

        job, attempts = our_job(env, name, dest)
        results = [attempt.result for attempt in attempts]
        commit = data.draw(st.booleans(), label="commit")
        if commit:
            job.committer.commit_job(results)
        else:
            assert job.committer.abort_job() is None

        assert {path: env.store.read_bytes(path) for path in theirs} == before, "another job's files changed"
        assert their_uploads <= _pending(env, dest), "another job's uploads were aborted"
        for path, upload_id in their_uploads:  # clear the other job away by hand: its own abort
            env.store.abort_multipart_upload(path, upload_id)  # may not read its damaged files
        env.store.delete_files(theirs)
        env.store.delete_tree(other.committer.layout.job_dir)
        check_end_state(env, job, attempts, root, commit)
        count("accepted")  # our job went its own way, whatever the other job's files held

    run_examples(env, name, case)


@every_committer_on_both_stores
def test_a_forged_outcome(commit_env: CommitEnv, name: str) -> None:
    env = commit_env

    def case(data: st.DataObject) -> None:
        root = env.fresh_root()
        job, attempts = our_job(env, name, root.join("out"))
        results = [attempt.result for attempt in attempts]
        decision = data.draw(st.sampled_from(["commit", "abort"]), label="decision")
        valid = JobOutcome(job.job_id, decision, name, tuple(results)).to_bytes()
        outcome = job.committer.layout.outcome
        env.store.write_bytes(outcome, data.draw(stored_bytes(valid, json.loads(valid)), label="outcome"))

        refused = (InvalidCommitDataError, CommitError)
        names = (outcome.name, job.job_id)
        committed: SuccessData | None = accepted_or_refused(
            lambda: job.committer.commit_job(results), refused, *names
        )
        if committed is None:
            committed = accepted_or_refused(job.committer.abort_job, refused, *names)
        check_end_state(env, job, attempts, root, committed is not None)

    run_examples(env, name, case)


def _empty(job: JobRun, results: list[TaskCommitResult]) -> bytes:
    """The campaign's input: an empty outcome file (commit and abort both refused it, for ever)."""
    return b""


def _another_jobs_task(job: JobRun, results: list[TaskCommitResult]) -> bytes:
    foreign = JobLayout(job.dest, "another-job")
    task = replace(results[0], task_id=foreign.task_id(0), task_attempt_id=foreign.task_attempt_id(0, 0))
    return JobOutcome(job.job_id, "commit", job.name, (task, *results[1:])).to_bytes()


def _a_task_twice(job: JobRun, results: list[TaskCommitResult]) -> bytes:
    return JobOutcome(job.job_id, "commit", job.name, (*results, results[0])).to_bytes()


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@pytest.mark.parametrize("name", ["file-v1", "magic"])
@pytest.mark.parametrize("forge", [_empty, _another_jobs_task, _a_task_twice])
def test_an_unreadable_outcome_is_refused_and_overruled_by_abort(
    commit_env: CommitEnv, name: str, forge: Callable[[JobRun, list[TaskCommitResult]], bytes]
) -> None:
    """Job commit refuses an outcome that cannot be this job's decision, naming it; abort, finding
    nothing of the job visible, replaces it by an abort (before, both refused it for ever)."""
    env = commit_env
    root = env.fresh_root()
    job, attempts = our_job(env, name, root.join("out"))
    results = [attempt.result for attempt in attempts]
    outcome = job.committer.layout.outcome
    env.store.write_bytes(outcome, forge(job, results))
    with pytest.raises(InvalidCommitDataError, match=outcome.name):
        job.committer.commit_job(results)
    assert job.committer.abort_job() is None
    check_end_state(env, job, attempts, root, committed=False)


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_an_unreadable_outcome_of_a_commit_under_way_stands(commit_env: CommitEnv) -> None:
    """Once a file of the job may be visible, abort must not overrule the outcome: it refuses, naming
    it, and touches nothing (rolling forward needs the task list only that file held)."""
    env = commit_env
    job, attempts = our_job(env, "file-v1", env.fresh_root().join("out"))
    committer = job.committer
    results = [attempt.result for attempt in attempts]
    job_state.decide(committer.context, JobOutcome(job.job_id, "commit", job.name, tuple(results)))
    manifest = committer.layout.manifest_path(attempts[0].handle.task_id)
    first = TaskManifest.from_bytes(env.store.read_bytes(manifest), str(manifest)).files[0]
    assert first.source is not None
    env.store.rename_file(StorePath.from_uri(first.source), StorePath.from_uri(first.dest))  # rolled forward
    env.store.write_bytes(committer.layout.outcome, b"")
    before = store_files(env.store, job.dest)
    with pytest.raises(InvalidCommitDataError, match=committer.layout.outcome.name):
        committer.abort_job()
    assert store_files(env.store, job.dest) == before


def _document(valid: bytes) -> object:
    try:
        return json.loads(valid)
    except ValueError:  # a job marker or record damaged already: damage it further as bytes
        return {}


def _pending(env: CommitEnv, dest: StorePath) -> set[tuple[StorePath, str]]:
    if not env.store.capabilities.multipart_upload:
        return set()
    return {(upload.path, upload.upload_id) for upload in env.store.list_multipart_uploads(dest)}
