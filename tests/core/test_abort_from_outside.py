"""Aborting a job from outside its driver, as the operator does when a try fails or is killed."""

from __future__ import annotations

from pathlib import Path

from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet
from airflow_commit_provider.core.job_control import JobState, abort_job, inspect_job
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.tries.hadoop_jobs import abort_hadoop_job

HADOOP_JOB = "5a1e3c9e-0000-4000-8000-000000000001"


def files_under(store: Store, destination: StorePath) -> list[str]:
    return sorted(status.path.relative_to(destination) for status in store.list_files(destination))


def pending_upload(store: Store, target: StorePath) -> PendingCommit:
    upload = store.create_multipart_upload(target)
    etag = store.upload_part(target, upload, 1, b"x" * 1024)
    return PendingCommit(target.uri(), target.bucket, target.key, upload, (etag,), 1024)


def test_hadoop_abort_cleans_the_s3a_magic_job(s3_store: Store, s3_bucket: str) -> None:
    """Uploads listed in the job's .pending and .pendingset files are aborted, its trees deleted."""
    destination = StorePath("s3", s3_bucket, "tables/events")
    task = JobLayout(destination, HADOOP_JOB, magic=True).job_dir.join(f"job-{HADOOP_JOB}", "tasks")
    single = pending_upload(s3_store, destination.join("dt=2024-01-01", "part-00000.parquet"))
    s3_store.write_bytes(
        task.join("attempt_0", "__base", "dt=2024-01-01", "part-00000.parquet.pending"), single.to_bytes()
    )
    listed = pending_upload(s3_store, destination.join("dt=2024-01-02", "part-00001.parquet"))
    pendingset = PendingSet(HADOOP_JOB, "task_0", "attempt_1", [listed])
    s3_store.write_bytes(task.join("attempt_1.pendingset"), pendingset.to_bytes())
    s3_store.write_bytes(task.join("garbage.pendingset"), b"not json")
    s3_store.write_bytes(destination.join("_temporary", HADOOP_JOB, "x"), b"1")
    s3_store.write_bytes(destination.join("_temporary", "another-job", "y"), b"2")

    report = abort_hadoop_job(s3_store, str(destination), HADOOP_JOB)
    assert report.uploads_aborted == 2
    assert list(s3_store.list_multipart_uploads(destination)) == []
    assert files_under(s3_store, destination) == ["_temporary/another-job/y"], "other jobs' trees are kept"
    assert f"job {HADOOP_JOB}: aborted 2 uploads" in report.describe()


def test_abort_of_a_job_whose_committer_the_store_cannot_host(tmp_path: Path) -> None:
    """No committer could have run it: both job directories go, and nothing is decided."""
    store = LocalStore()
    destination = StorePath.parse(str(tmp_path / "out"))
    job = "job-1"
    for magic in (False, True):
        store.write_bytes(JobLayout(destination, job, magic=magic).job_marker, b"{}")
    assert abort_job(store, destination, job, "no-such-committer", "the try failed") is None
    assert files_under(store, destination) == []
    assert inspect_job(store, destination, job).state is JobState.UNKNOWN
