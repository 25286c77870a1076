"""Memory that does not grow with the files of one task (issue 28, `docs/bounded-commits.md`):
job commit of one task of 50k files holds what it holds at 5k, and a task attempt of 5k files
what one of 500 holds (HADOOP-19047: S3A's magic committer keeps every file's commit data in its task, and builds and
parses its pendingset whole; here a magic task of 100k files peaked at 895 MB of RSS).

Python's allocations are traced (tracemalloc): what grows per file is Python objects (streams,
commit data, parsed JSON). The spools hold one run in memory before they spill (about 16 MB of
records), which is the constant allowed between the two sizes.
"""

from __future__ import annotations

import functools
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from support.fixtures import CommitEnv, commit_env_fixture, scratch_dir_fixture  # noqa: F401
from support.workload import JobRun

from airflow_commit_provider.core.committers.base import TaskAttempt
from airflow_commit_provider.core.formats.json_stream import Writable
from airflow_commit_provider.core.formats.manifest import FileEntry, TaskManifest, write_task_manifest
from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet, write_pendingset
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.load_manifests import load_committed_manifests
from airflow_commit_provider.core.stages.manifests import ManifestSummary, decode_pendingset
from airflow_commit_provider.core.stages.task_commit import written_manifest
from airflow_commit_provider.core.store.base import PendingUpload
from airflow_commit_provider.core.store.local import LocalStore

#: Job commit's sizes: the difference (45k entries) is what a leak must exceed `ALLOWED_GROWTH` in;
#: reading a manifest whole (about 3.3 KB an entry, 330 MB at 100k) exceeds it six times over.
SMALL, LARGE = 5_000, 50_000
#: A task attempt's sizes: each file is a real one written through the store (and for magic a
#: pending upload with its record), so ten times fewer than for job commit; the bench measures
#: 100k (`bench/job_commit_memory.py task`). The old code held about 9 KB a file (a magic task of
#: 100k files: 895 MB of RSS), about 40 MB between the two sizes, well over `ALLOWED_GROWTH`. A
#: task attempt spools what it keeps of each file (`sorted_spool.RecordLog`); a staging attempt
#: uploads its files `uploads.UPLOADS_PER_RECORD` (10k) at a time, whose commits are in memory
#: until spooled.
SMALL_TASK, LARGE_TASK = 500, 5_000
#: What may differ between the peaks at `SMALL` and at `LARGE` files: a spool's run in memory
#: (`sorted_spool.RUN_BYTES`, counted by its records' sizes, which Python's objects exceed).
ALLOWED_GROWTH = 24 * 1024**2
T = TypeVar("T")


def _write_files(attempt: TaskAttempt, files: int) -> None:
    for index in range(files):
        with attempt.create_file(f"dt={index % 10}/part-00000-{index:07d}.bin") as out:
            out.write(b"x")


def _committed_files(env: CommitEnv, dest: StorePath) -> int:
    """The data files visible under `dest` (not the records or markers)."""
    return sum(1 for status in env.store.list_files(dest) if status.path.key.endswith(".bin"))


def _traced(action: Callable[[], T]) -> tuple[T, int]:
    """What `action` returns, and the peak of Python's allocations while it ran."""
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@pytest.mark.parametrize("name", ["magic", "directory", "manifest"])
def test_a_task_attempt_of_5k_files_holds_what_one_of_500_does(commit_env: CommitEnv, name: str) -> None:
    """From before its first file to after its task commit (the pendingset or task manifest of
    100k files is about 75 MB), and the task's manifest lists every file."""
    env = commit_env
    peaks: dict[int, int] = {}
    for files in (SMALL_TASK, LARGE_TASK):
        dest = env.fresh_root().join("out")
        job = JobRun.create(name, env.store, dest, env.options())
        job.committer.setup_job()
        attempt = job.committer.task_attempt(0, 0)
        attempt.setup_task()

        def run(attempt: TaskAttempt = attempt, files: int = files) -> TaskCommitResult:
            _write_files(attempt, files)
            return attempt.commit_task(rows=files)

        result, peaks[files] = _traced(run)
        assert result.files == files
        success = job.committer.commit_job([result])
        assert success.file_count == files
        assert _committed_files(env, dest) == files
        env.store.delete_tree(dest)
    print(f"{name}: task attempt peaks {peaks}")
    assert peaks[LARGE_TASK] < peaks[SMALL_TASK] + ALLOWED_GROWTH, peaks


TASK_ID, ATTEMPT_ID = "task_job_m_000000", "attempt_job_m_000000_0"


def _manifest_of(job: JobRun, files: int) -> TaskCommitResult:
    """One task's committed manifest of `files` entries of 1 byte, written straight to the store as
    its task commit writes it (streamed to a local file, hashed, one create-if-absent PUT): what
    job commit reads, without the files themselves (loading the manifests checks names, not data)."""
    committer = job.committer
    summary = ManifestSummary(committer.job_id, TASK_ID, ATTEMPT_ID, files, files)
    with written_manifest(summary, lambda out: _write_manifest(out, job, files)) as manifest:
        path = committer.layout.manifest_path(TASK_ID)
        committer.store.write_stream(path, manifest.body, if_absent=True)
        return TaskCommitResult(TASK_ID, ATTEMPT_ID, path.uri(), files, files, digest=manifest.digest)


def _write_manifest(out: Writable, job: JobRun, files: int) -> None:
    """The manifest of the job's committer (a pendingset, a task manifest) of `files` entries."""
    committer = job.committer
    dest = committer.destination
    names = (f"part-{index:07d}.bin" for index in range(files))
    if committer.decoder is decode_pendingset:
        commits = (
            PendingCommit(dest.join(n).uri(), dest.bucket, n, f"upload-{n}", ("etag",), 1) for n in names
        )
        write_pendingset(out, PendingSet(committer.job_id, TASK_ID, ATTEMPT_ID), commits)
    else:
        renamed = (FileEntry(committer.layout.job_dir.join(n).uri(), dest.join(n).uri(), 1) for n in names)
        write_task_manifest(out, TaskManifest(committer.job_id, TASK_ID, ATTEMPT_ID, ""), renamed)


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@pytest.mark.parametrize("name", ["magic", "manifest"])
def test_job_commit_reads_a_50k_file_manifest_in_what_a_5k_one_takes(
    commit_env: CommitEnv, name: str
) -> None:
    """A job of a few huge tasks: job commit reads each task's manifest (a pendingset, a task
    manifest) as it streams in, one entry at a time to the spool, its digest taken on the way,
    never the whole file (about 330 MB for one of 100k files parsed whole); every entry is loaded."""
    env = commit_env
    peaks: dict[int, int] = {}
    for files in (SMALL, LARGE):
        job = JobRun.create(name, env.store, env.fresh_root().join("out"), env.options())
        job.committer.setup_job()
        result = _manifest_of(job, files)
        committer = job.committer
        loaded, peaks[files] = _traced(
            functools.partial(load_committed_manifests, committer.context, [result], committer.decoder)
        )
        with loaded:
            assert loaded.spool.count == files
            keys = [entry.dest for entry in loaded.spool]
            assert len(keys) == files and keys == sorted(keys)
        committer.abort_job()
    print(f"{name}: manifest loading peaks {peaks}")
    assert peaks[LARGE] < peaks[SMALL] + ALLOWED_GROWTH, peaks


def list_uploads(store: LocalStore, directory: StorePath) -> list[PendingUpload]:
    return list(store.list_multipart_uploads(directory))


def test_listing_local_uploads_holds_no_name_of_the_files_beside_them(scratch_dir: Path) -> None:
    """Job cleanup lists a destination's pending uploads: on the local store, a walk that holds
    its subdirectories' names only (os.walk held every committed file's name: +88 MB at 1M files).
    The files' count must not reach the peak: 2k and 20k flat files, one pending upload each time."""
    store = LocalStore()
    peaks: dict[int, int] = {}
    for files in (2_000, 20_000):
        root = scratch_dir / f"flat-{files}"
        (root / "dt=1").mkdir(parents=True)
        for index in range(files):
            (root / f"part-{index:07d}-with-a-name-as-long-as-sparks-own.parquet").touch()
        destination = StorePath.parse(str(root))
        upload = store.create_multipart_upload(destination.join("dt=1/pending.bin"))
        listed, peaks[files] = _traced(functools.partial(list_uploads, store, destination))
        assert [(found.path, found.upload_id) for found in listed] == [
            (destination.join("dt=1/pending.bin"), upload)
        ]
    # os.walk's list of 18k more names is over 1.5 MB; the walk's own peak is a few KB.
    assert peaks[20_000] - peaks[2_000] < 256 * 1024, peaks
