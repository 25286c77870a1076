"""Fuzz the protocol with hostile stored files (issue 21, item 2), on the local store.

A job commits two tasks; then the first task's committed manifest (TaskManifest or PendingSet) is
replaced by fuzzed bytes: damaged field by field (destinations outside the table among them),
truncated, flipped, or anything. Job commit then either commits everything or refuses with the
documented error naming the file; a refused job aborts. Either way nothing outside the destination
is touched, and no temporary file or pending upload is left.

Findings kept below as regression cases, each with the campaign's input: a manifest naming a
source in the job's directory that is not there, a pendingset leaving out uploads its task
recorded, and a `_SUCCESS` listing files outside its table.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fixtures import CommitEnv, commit_env_fixture, scratch_dir_fixture  # noqa: F401
from support.fuzzing import EXAMPLES, FUZZ, accepted_or_refused, encoded, mutated, stored_bytes
from support.invariants import (
    assert_aborted,
    assert_committed,
    is_temp,
    split_records,
    store_files,
)
from support.workload import COMMITTER_PARAMS, UPLOAD_COMMITTERS, JobRun, expected_output, skip_unsupported

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.success.check import SuccessExpectations

#: Each example is a whole job on the local store: a tenth of a parser's budget.
PROTOCOL = settings(FUZZ, max_examples=max(EXAMPLES // 10, 10), suppress_health_check=list(HealthCheck))
#: Destinations a forged manifest may name: beside, above and across the table.
FORGED_DESTINATIONS = (
    "../out-evil/x.bin",
    "../out0/x.bin",
    "../escaped.bin",
    "_SUCCESS",
    "dt=1/../../up.bin",
)


@st.composite
def hostile_manifests(draw: st.DrawFn, valid: bytes, dest_uri: str) -> bytes:
    document = json.loads(valid)
    entries = document.get("files") or document.get("commits")
    if draw(st.booleans()) and entries:
        entry = entries[0]
        entry["d" if "d" in entry else "uri"] = f"{dest_uri}/{draw(st.sampled_from(FORGED_DESTINATIONS))}"
        return encoded(draw(st.one_of(st.just(document), mutated(document, changes=1))))
    return draw(stored_bytes(valid, document))


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@pytest.mark.parametrize("name", COMMITTER_PARAMS)
@PROTOCOL
@given(data=st.data())
def test_job_commit_with_a_hostile_manifest(commit_env: CommitEnv, name: str, data: st.DataObject) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    root = env.fresh_root()
    job = JobRun.create(name, env.store, root.join("out"), env.options())
    job.committer.setup_job()
    attempts = [job.run_task(0, 0, ["dt=1/a.bin", "dt=2/b.bin"]), job.run_task(1, 0, ["dt=1/c.bin"])]
    manifest = job.committer.layout.manifest_path(attempts[0].handle.task_id)
    env.store.write_bytes(
        manifest,
        data.draw(hostile_manifests(env.store.read_bytes(manifest), job.dest.uri()), label="manifest"),
    )
    results = [attempt.result for attempt in attempts]
    committed = accepted_or_refused(
        lambda: job.committer.commit_job(results),
        (InvalidCommitDataError, CommitError),
        manifest.name,
        job.job_id,
    )
    if committed is None:
        job.committer.abort_job()
        if name != "file-v2":  # its task commits published already (test_commit_file_v2.py)
            assert_aborted(env.store, job.dest)
    elif name != "file-v2":
        # A manifest is its task's word: one listing fewer files commits fewer. What is visible
        # is then task output, unchanged, and exactly what `_SUCCESS` lists.
        visible = store_files(env.store, job.dest)
        split_records(visible)
        expected = expected_output(*attempts)
        output = {relative: data for relative, data in visible.items() if not is_temp(relative)}
        assert all(expected.get(relative) == data for relative, data in output.items()), sorted(output)
        assert_committed(env.store, job.dest, output, job_id=job.job_id)
    outside = sorted(key for key in store_files(env.store, root) if not key.startswith("out/"))
    assert not outside, f"written outside the destination: {outside}"


def two_task_job(env: CommitEnv, committer: str) -> tuple[JobRun, list[Any]]:
    """A job set up under `out/` with two committed tasks (three files), its job commit still to run."""
    job = JobRun.create(committer, env.store, env.fresh_root().join("out"), env.options())
    job.committer.setup_job()
    return job, [job.run_task(0, 0, ["dt=1/a.bin", "dt=2/b.bin"]), job.run_task(1, 0, ["dt=1/c.bin"])]


def _source_flipped(document: dict[str, Any]) -> None:
    """The campaign's input: one byte of the source path flipped (`00` -> `$0`)."""
    entry = document["files"][0]
    entry["s"] = entry["s"].replace("/00/committed/", "/$0/committed/", 1)


def _size_changed(document: dict[str, Any]) -> None:
    document["files"][0]["z"] += 1


def _source_named_twice(document: dict[str, Any]) -> None:
    document["files"][1]["s"] = document["files"][0]["s"]


def _upload_id_flipped(document: dict[str, Any]) -> None:
    """The campaign's input (magic): one byte of an upload ID flipped to a space."""
    commit = document["commits"][0]
    commit["uploadId"] = commit["uploadId"][:-3] + " " + commit["uploadId"][-2:]


def _upload_moved(document: dict[str, Any]) -> None:
    """The campaign's input (magic): one byte of an upload's destination flipped, in the table still."""
    commit = document["commits"][0]
    commit["uri"] = commit["uri"].replace("/a.bin", "/a. in")


def _etag_flipped(document: dict[str, Any]) -> None:
    """The campaign's input (magic): one byte of an upload's part ETag flipped to a space."""
    commit = document["commits"][0]
    commit["etags"] = [commit["etags"][0][:5] + " " + commit["etags"][0][6:]]


def _length_changed(document: dict[str, Any]) -> None:
    document["commits"][0]["length"] += 1


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@pytest.mark.parametrize(
    ("name", "forge"),
    [
        *(("file-v1", forge) for forge in (_source_flipped, _size_changed, _source_named_twice)),
        *((name, forge) for name in UPLOAD_COMMITTERS for forge in (_upload_id_flipped, _upload_moved)),
        *(("magic", forge) for forge in (_etag_flipped, _length_changed)),
    ],
)
def test_a_manifest_naming_what_is_not_there(
    commit_env: CommitEnv, name: str, forge: Callable[[dict[str, Any]], None]
) -> None:
    """A manifest whose source is missing, of another size or named twice, a pendingset naming an
    upload that is not pending, or one whose parts' ETags or length were forged, is refused before
    the commit point, naming the manifest; the job then aborts cleanly (before, each failed after its
    commit point and could neither commit nor abort, or a changed length committed a `_SUCCESS`
    misstating the file's size). The forged parts are caught by the digest the driver holds of each
    manifest; checking them in the store instead would cost a ListParts per upload."""
    env = commit_env
    job, attempts = two_task_job(env, name)
    manifest = job.committer.layout.manifest_path(attempts[0].handle.task_id)
    document = json.loads(env.store.read_bytes(manifest))
    forge(document)
    env.store.write_bytes(manifest, encoded(document))
    with pytest.raises(InvalidCommitDataError, match=manifest.name):
        job.committer.commit_job([attempt.result for attempt in attempts])
    job.committer.abort_job()
    assert_aborted(env.store, job.dest)


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@pytest.mark.parametrize("name", UPLOAD_COMMITTERS)
def test_uploads_a_pendingset_leaves_out_are_aborted(commit_env: CommitEnv, name: str) -> None:
    """The campaign's input (found with `partitioned`): a committed task's pendingset with `"commits": []`.

    The driver's results carry each manifest's digest, so job commit refuses it before its commit
    point. Results without one (a writer before the digest) commit what the pendingsets list, and
    cleanup aborts the uploads the task's own records name that were left out."""
    env = commit_env
    job, attempts = two_task_job(env, name)
    manifest = job.committer.layout.manifest_path(attempts[0].handle.task_id)
    document = json.loads(env.store.read_bytes(manifest))
    document["commits"] = []
    env.store.write_bytes(manifest, encoded(document))
    with pytest.raises(InvalidCommitDataError, match=f"{manifest.name}: not the manifest"):
        job.committer.commit_job([attempt.result for attempt in attempts])
    undigested = [dataclasses.replace(attempt.result, digest=None) for attempt in attempts]
    job.committer.commit_job(undigested)
    assert_committed(env.store, job.dest, attempts[1].files, job_id=job.job_id)


def committed_success(env: CommitEnv) -> tuple[JobRun, StorePath, bytes]:
    """A committed table (file-v1, two tasks), its `_SUCCESS` and that file's bytes."""
    job, attempts = two_task_job(env, "file-v1")
    job.committer.commit_job([attempt.result for attempt in attempts])
    marker = job.dest.join("_SUCCESS")
    return job, marker, env.store.read_bytes(marker)


def never_accepted(env: CommitEnv, job: JobRun, marker: StorePath, data: bytes) -> None:
    """What a sensor checks, with and without a job ID: refused naming the file, or not accepted
    on the strength of this `_SUCCESS` (the job's own record may still prove the job)."""
    env.store.write_bytes(marker, data)
    for job_id in (None, job.job_id):
        seen = accepted_or_refused(
            lambda job_id=job_id: SuccessExpectations(job_id=job_id, min_files=1).check(env.store, job.dest),
            InvalidCommitDataError,
            str(marker),
        )
        assert seen is None or seen.state != "accepted" or seen.from_record, seen


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_a_sensor_never_passes_a_truncated_success(commit_env: CommitEnv) -> None:
    job, marker, valid = committed_success(commit_env)

    @PROTOCOL
    @given(st.integers(0, len(valid) - 1))
    def check(end: int) -> None:
        never_accepted(commit_env, job, marker, valid[:end])

    check()


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
def test_a_sensor_never_passes_a_success_naming_files_outside_the_table(commit_env: CommitEnv) -> None:
    """The campaign's input: the table's own `_SUCCESS` listing, inline as older ones of ours did, a
    file of a sibling table (ours now list their files in the file list, which a sensor never reads)."""
    job, marker, valid = committed_success(commit_env)
    document = json.loads(valid)
    document["files"] = [{"path": job.dest.parent.join("other", "x.bin").uri(), "size": 1}]
    never_accepted(commit_env, job, marker, encoded(document))
