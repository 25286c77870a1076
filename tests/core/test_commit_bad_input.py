"""Bad input: every case gets a clear error naming the file, and nothing becomes visible.

A job commits two tasks; then one committed manifest (TaskManifest for the rename committers,
PendingSet for the upload committers) is damaged in the store, and job commit must refuse it
before making any file visible. Afterwards the job aborts cleanly and no file was ever written
outside the destination.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_aborted, assert_committed, store_files
from support.workload import ALL_COMMITTERS, UPLOAD_COMMITTERS, JobRun, each_committer_once, skip_unsupported

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.job_control import inspect_job
from airflow_commit_provider.core.paths import InvalidPathError, StorePath
from airflow_commit_provider.core.stages.task_commit import manifest_digest

Json = dict[str, Any]


def entries(obj: Json) -> list[Json]:
    """The file entries of a TaskManifest (`files`) or PendingSet (`commits`)."""
    return obj["files"] if "files" in obj else obj["commits"]


def dest_of(entry: Json) -> str:
    return entry["d"] if "d" in entry else entry["uri"]


def set_dest(entry: Json, location: StorePath | str) -> None:
    uri = location.uri() if isinstance(location, StorePath) else location
    if "d" in entry:
        entry["d"] = uri
    else:
        entry["uri"] = uri
        if isinstance(location, StorePath):
            entry["bucket"], entry["destinationKey"] = location.bucket, location.key


def on_json(change: Callable[[Json, JobRun], None]) -> Callable[[bytes, JobRun], bytes]:
    def tamper(data: bytes, job: JobRun) -> bytes:
        obj = json.loads(data)
        change(obj, job)
        return json.dumps(obj).encode()

    return tamper


def wrong_type(obj: Json, job: JobRun) -> None:
    if "type" in obj:
        obj["type"] = obj["type"].replace("TaskManifest/1", "TaskManifest/2")
    else:
        obj["version"] = 99


def wrong_version(obj: Json, job: JobRun) -> None:
    obj["version"] = 7


def wrong_entry_version(obj: Json, job: JobRun) -> None:
    if "commits" in obj:
        obj["commits"][0]["version"] = 99
    else:
        obj["type"] = "org.apache.hadoop.fs.s3a.commit.files.PendingSet/1"


def other_job(obj: Json, job: JobRun) -> None:
    obj["jobId"] = "another-job-0000"


def duplicate_entry(obj: Json, job: JobRun) -> None:
    entries(obj).append(dict(entries(obj)[0]))


def outside(relative_to_root: str) -> Callable[[Json, JobRun], None]:
    def change(obj: Json, job: JobRun) -> None:
        root = job.dest.parent
        set_dest(entries(obj)[0], root.join(relative_to_root))

    return change


def traversal(obj: Json, job: JobRun) -> None:
    set_dest(entries(obj)[0], job.dest.uri() + "/dt=1/../../escaped.bin")


def hidden_dest(obj: Json, job: JobRun) -> None:
    set_dest(entries(obj)[0], job.dest.join("_SUCCESS"))


def other_bucket_or_scheme(obj: Json, job: JobRun) -> None:
    if job.dest.is_local:
        set_dest(entries(obj)[0], StorePath("s3", "some-bucket", "out/x.bin"))
    else:
        set_dest(entries(obj)[0], StorePath("s3", job.dest.bucket + "-other", job.dest.key + "/x.bin"))


def negative_size(obj: Json, job: JobRun) -> None:
    entry = entries(obj)[0]
    entry["z" if "z" in entry else "length"] = -1


def missing_field(obj: Json, job: JobRun) -> None:
    entry = entries(obj)[0]
    del entry["d" if "d" in entry else "uploadId"]


def files_not_a_list(obj: Json, job: JobRun) -> None:
    obj["files" if "files" in obj else "commits"] = {"oops": 1}


CASES: dict[str, Callable[[bytes, JobRun], bytes]] = {
    "truncated": lambda data, job: data[: len(data) // 2],
    "empty": lambda data, job: b"",
    "corrupt-bytes": lambda data, job: b"\x00\xff\xfe not json at all",
    "not-an-object": lambda data, job: b"[1, 2, 3]",
    "wrong-name-or-type": on_json(wrong_type),
    "wrong-version": on_json(wrong_version),
    "wrong-entry-version": on_json(wrong_entry_version),
    "job-id-mismatch": on_json(other_job),
    "duplicate-destination": on_json(duplicate_entry),
    "outside-sibling-prefix": on_json(outside("out-evil/x.bin")),
    "outside-sibling-prefix-10": on_json(outside("out0/x.bin")),
    "outside-parent": on_json(outside("escaped.bin")),
    "outside-traversal": on_json(traversal),
    "outside-other-bucket-or-scheme": on_json(other_bucket_or_scheme),
    "hidden-destination": on_json(hidden_dest),
    "negative-size": on_json(negative_size),
    "missing-field": on_json(missing_field),
    "files-not-a-list": on_json(files_not_a_list),
}
#: file-v1 (TaskManifest) and magic (PendingSet) get every case on both stores, and the other
#: committers these, one per kind of damage, on local files: each case is a whole job, and
#: validation is shared code per format, so the rest would test the same lines again.
S3_CASES = [
    "truncated",
    "wrong-name-or-type",
    "job-id-mismatch",
    "duplicate-destination",
    "outside-sibling-prefix",
    "outside-traversal",
]
EXPECTED_WORDS = {
    "truncated": "truncated or corrupt",
    "empty": "empty",
    "corrupt-bytes": "corrupt",
    "not-an-object": "JSON object",
    "job-id-mismatch": "job ID",
    "duplicate-destination": "duplicate destination",
    "outside-sibling-prefix": "outside",
    "outside-sibling-prefix-10": "outside",
    "outside-parent": "outside",
    "outside-other-bucket-or-scheme": "outside",
    "negative-size": "negative",
}


def committed_job(env: CommitEnv, name: str, dest: StorePath | None = None) -> tuple[JobRun, list]:
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, dest or env.dest, env.options())
    job.committer.setup_job()
    first = job.run_task(0, 0, ["dt=1/a.bin", "dt=2/b.bin"])
    second = job.run_task(1, 0, ["dt=1/c.bin"])
    return job, [first, second]


def assert_refused(
    env: CommitEnv, job: JobRun, attempts: list, bad_manifest: StorePath, words: str | None
) -> None:
    before = store_files(env.store, job.dest)
    with pytest.raises(InvalidCommitDataError) as caught:
        job.committer.commit_job([a.result for a in attempts])
    message = str(caught.value)
    assert bad_manifest.name in message, f"the error does not name the file: {message}"
    if words:
        assert words in message, message
    after = store_files(env.store, job.dest)
    assert "_SUCCESS" not in after
    newly_visible = {k for k in after if not k.startswith("_") and k not in before}
    assert not newly_visible, f"partially visible after a refused commit: {newly_visible}"
    if job.name != "file-v2":
        assert not {k for k in after if not k.startswith("_")}, "output visible before job commit"


def refuse_damaged(env: CommitEnv, name: str, case: str) -> None:
    root = env.root.join(case)
    job, attempts = committed_job(env, name, root.join("out"))
    manifest = job.committer.layout.manifest_path(attempts[0].handle.task_id)
    env.store.write_bytes(manifest, CASES[case](env.store.read_bytes(manifest), job))
    assert_refused(env, job, attempts, manifest, EXPECTED_WORDS.get(case))
    job.committer.abort_job()
    if name == "file-v2":
        return  # its task commits published already; see test_commit_file_v2.py
    assert_aborted(env.store, job.dest)
    # nothing was ever written outside the destination
    outside = {k for k in store_files(env.store, root) if not k.startswith("out/")}
    assert not outside, f"files written outside the destination: {outside}"


@pytest.mark.parametrize(
    ("name", "commit_env"),
    [
        *(
            pytest.param(name, kind, id=f"{kind}-{name}", marks=[pytest.mark.s3] if kind == "s3" else [])
            for name in ("file-v1", "magic")
            for kind in ("local", "s3")
        ),
        *(
            pytest.param(name, "local", id=f"local-{name}")
            for name in ("file-v2", "manifest", "directory", "partitioned")
        ),
    ],
    indirect=["commit_env"],
)
def test_damaged_manifest_is_refused(commit_env: CommitEnv, name: str) -> None:
    """The damages in CASES (every one for file-v1 and magic, S3_CASES for the others), each in a
    job of its own (run side by side on S3)."""
    skip_unsupported(name, commit_env.store)

    def run(case: str) -> str | None:
        try:
            refuse_damaged(commit_env, name, case)
        except AssertionError as error:
            return f"{case}: {error}"
        except Exception as error:
            return f"{case}: unexpected {type(error).__name__}: {error}"
        return None

    cases = list(CASES) if name in ("file-v1", "magic") else S3_CASES
    with ThreadPoolExecutor(1 if commit_env.kind == "local" else 4) as pool:
        failures = [failure for failure in pool.map(run, cases) if failure]
    assert not failures, "\n".join(failures)


@each_committer_once(ALL_COMMITTERS)
def test_duplicate_destination_across_tasks_is_refused(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    job, attempts = committed_job(env, name)
    donor = json.loads(env.store.read_bytes(job.committer.layout.manifest_path(attempts[0].handle.task_id)))
    manifest = job.committer.layout.manifest_path(attempts[1].handle.task_id)
    obj = json.loads(env.store.read_bytes(manifest))
    entries(obj).append(entries(donor)[0])
    written = json.dumps(obj).encode()
    env.store.write_bytes(manifest, written)
    # As a faulty writer's task would report it (its result names the bytes it wrote): not a
    # manifest changed afterwards, which its digest would give away first.
    results = [a.result for a in attempts]
    results[1] = dataclasses.replace(results[1], digest=manifest_digest(written))
    with pytest.raises(InvalidCommitDataError, match="duplicate destination") as caught:
        job.committer.commit_job(results)
    donor_manifest = job.committer.layout.manifest_path(attempts[0].handle.task_id)
    assert manifest.name in str(caught.value) and donor_manifest.name in str(caught.value), (
        f"the error names both manifests: {caught.value}"
    )


@pytest.mark.parametrize("name", [n for n in UPLOAD_COMMITTERS])
@pytest.mark.parametrize("commit_env", [pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
def test_same_object_under_another_s3_scheme_is_a_duplicate(commit_env: CommitEnv, name: str) -> None:
    """`s3a://b/k` and `s3://b/k` are one object: listing it twice must count as a duplicate."""
    env = commit_env
    job, attempts = committed_job(env, name)
    manifest = job.committer.layout.manifest_path(attempts[0].handle.task_id)
    obj = json.loads(env.store.read_bytes(manifest))
    twin = dict(entries(obj)[0])
    twin["uri"] = twin["uri"].replace("s3://", "s3a://", 1)
    entries(obj).append(twin)
    env.store.write_bytes(manifest, json.dumps(obj).encode())
    with pytest.raises(InvalidCommitDataError, match="duplicate destination"):
        job.committer.commit_job([a.result for a in attempts])


@each_committer_once(ALL_COMMITTERS, first="local")
def test_job_id_mismatch_in_the_driver_report(commit_env: CommitEnv, name: str) -> None:
    """A result from another job handed to this job's commit is refused, naming the manifest."""
    env = commit_env
    job, attempts = committed_job(env, name)
    other = JobRun.create(name, env.store, env.root.join("other"), env.options())
    other.committer.setup_job()
    foreign = other.run_task(0, 0, ["x.bin"])
    with pytest.raises(Exception, match="manifest") as caught:
        job.committer.commit_job([attempts[1].result, foreign.result])
    assert foreign.handle.task_id in str(caught.value)
    assert "_SUCCESS" not in store_files(env.store, env.dest)


@each_committer_once(ALL_COMMITTERS)
def test_task_output_outside_the_destination_is_refused(commit_env: CommitEnv, name: str) -> None:
    """Each escaping name is refused as the attempt creates it (one attempt tries them all)."""
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.committer.task_attempt(0, 0)
    attempt.setup_task()
    for relative in ["../escape.bin", "dt=1/../../escape.bin", "a/../../../escape.bin"]:
        with pytest.raises(InvalidPathError, match="not allowed") as caught:
            attempt.create_file(relative)
        assert relative in str(caught.value)
    job.committer.abort_job()
    written = store_files(env.store, env.root)
    layout = job.committer.layout
    outcome = inspect_job(env.store, env.dest, layout.job_id).outcome
    assert outcome is not None and outcome.decision == "abort"
    decided = [layout.outcome, layout.index_entry(outcome.timestamp)]
    assert sorted(written) == sorted(f"out/{path.relative_to(env.dest)}" for path in decided), (
        "something was written besides the abort's outcome and its index entry"
    )


@each_committer_once(ALL_COMMITTERS, first="local")
def test_absolute_looking_names_stay_inside_the_destination(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0, ["/etc/passwd-like.bin", "//double//slashes.bin"])
    job.committer.commit_job([attempt.result])
    expected = {
        "etc/passwd-like.bin": attempt.files["/etc/passwd-like.bin"],
        "double/slashes.bin": attempt.files["//double//slashes.bin"],
    }
    assert_committed(env.store, env.dest, expected, job_id=job.job_id)


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)  # refused before any store call
@pytest.mark.parametrize("bad", ["", "../x", "a/b", "has space", "-leading-dash", "x" * 200, "job\n1"])
def test_bad_job_ids_are_refused(commit_env: CommitEnv, bad: str) -> None:
    for name in ("magic", "file-v1"):
        with pytest.raises(ValueError, match="job_id"):
            create_committer(name, commit_env.store, commit_env.dest, bad, commit_env.options())
