"""Setup helpers for the S3 scenarios: many pending multipart uploads, made fast and in parallel.

Setup is never measured. Each measured set of uploads is fresh and lives in a bucket of its own,
so ours and the baseline meet the same server state (SeaweedFS completes an already completed
upload again, which would flatter any repetition that reused one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.store.s3 import S3Store

#: Threads that create uploads during setup: SeaweedFS on 2 cores saturates well below this.
SETUP_THREADS = 32


@dataclass(frozen=True)
class RawUpload:
    key: str
    upload_id: str
    etag: str


def raw_client(s3: Any, threads: int) -> Any:
    """A boto3 client configured like S3Store's (pool sized to the threads, standard retries)."""
    return s3.client(
        max_pool_connections=threads + 4,
        retries={"mode": "standard", "max_attempts": 10},
    )


def create_raw_uploads(
    client: Any, bucket: str, prefix: str, count: int, payload: bytes, threads: int = SETUP_THREADS
) -> list[RawUpload]:
    """`count` pending uploads of one part each under `prefix/`, in parallel."""

    def make(index: int) -> RawUpload:
        key = f"{prefix}/part-{index:06d}.bin"
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=payload)[
            "ETag"
        ]
        return RawUpload(key, upload_id, etag)

    with ThreadPoolExecutor(threads, thread_name_prefix="setup") as pool:
        return list(pool.map(make, range(count)))


def complete_raw(client: Any, bucket: str, uploads: Sequence[RawUpload], threads: int) -> None:
    """The baseline: CompleteMultipartUpload for every upload on `threads` threads, nothing else."""

    def complete(upload: RawUpload) -> None:
        client.complete_multipart_upload(
            Bucket=bucket,
            Key=upload.key,
            UploadId=upload.upload_id,
            MultipartUpload={"Parts": [{"ETag": upload.etag, "PartNumber": 1}]},
        )

    with ThreadPoolExecutor(threads, thread_name_prefix="raw") as pool:
        for _ in pool.map(complete, uploads):
            pass


def task_outputs(
    committer_name: str,
    store: S3Store,
    destination: str,
    job_id: str,
    files: int,
    files_per_task: int,
    payload: bytes,
    work_dir: Path,
    task_threads: int = SETUP_THREADS,
) -> list[TaskCommitResult]:
    """Set up a job and run its tasks for real (create_file, write, commit_task), many at once.

    Each file becomes one pending upload of one part: magic streams it and records the upload per
    file; the staging committers write it locally and upload it at task commit, recording the
    task's uploads once. Returns the task results the driver would hand to job commit.
    """
    options = CommitOptions(threads=4, local_staging_dir=str(work_dir / "staging"))
    committer = create_committer(committer_name, store, destination, job_id, options)
    committer.setup_job()
    tasks = math.ceil(files / files_per_task)

    def run_task(task: int) -> TaskCommitResult:
        attempt = committer.task_attempt(task, 0)
        attempt.setup_task()
        first = task * files_per_task
        for index in range(first, min(first + files_per_task, files)):
            with attempt.create_file(f"part-{task:05d}-{index:06d}.bin") as stream:
                stream.write(payload)
        return attempt.commit_task()

    with ThreadPoolExecutor(task_threads, thread_name_prefix="task") as pool:
        return list(pool.map(run_task, range(tasks)))
