"""The staging committers: tasks write to local disk, task commit uploads each file as a
multipart upload left pending, job commit completes them. Nothing is renamed or copied.

`directory` resolves conflicts over the whole destination, `partitioned` per partition written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping

from airflow_commit_provider.core.committers.base import Committer, TaskAttempt
from airflow_commit_provider.core.committers.traits import CommitterTraits, JvmCommitter
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.partition_rows import record_partition_rows
from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet, write_pendingset
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import RecordLog
from airflow_commit_provider.core.stages import commit_files, conflicts
from airflow_commit_provider.core.stages.errors import JobNotActiveError
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.manifests import decode_pendingset
from airflow_commit_provider.core.stages.task_commit import written_manifest
from airflow_commit_provider.core.stages.uploads import (
    UPLOADS_PER_RECORD,
    batched,
    discard_attempt_uploads,
    record_uploads,
)
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.streams import LocalFileStream, PublishOnCloseStream


class StagingCommitter(Committer):
    name = "directory"
    required_capabilities = ("multipart_upload",)
    traits = CommitterTraits(
        family="upload",
        conflicts="destination",
        swaps_partitions=False,
        exclusive_task_commit=True,
        unsafe=False,
        partition_markers=False,
        jvm=JvmCommitter("s3a", records_job_id=True, aliases=("staging",)),
    )
    decoder = staticmethod(decode_pendingset)
    entry_action = commit_files.complete_uploads

    def setup_job(self) -> None:
        super().setup_job()
        if self.options.conflict_mode == "fail" and not self.per_partition:
            for status in conflicts.visible_files(self.context, self.destination):
                self.abort_job()
                raise conflicts.OutputConflictError(
                    f"job {self.job_id}: conflict_mode='fail' but the destination already holds {status.path}"
                )

    @property
    def per_partition(self) -> bool:
        """Whether conflicts are resolved per partition written rather than over the destination."""
        return self.traits.conflicts == "partition"

    def task_attempt(self, task: int, attempt: int) -> StagingTaskAttempt:
        return StagingTaskAttempt(self, task, attempt)

    def _before_entries(self, loaded: LoadedJob) -> None:
        if self.options.conflict_mode == "fail":
            conflicts.fail_on_existing_output(self.context, loaded.spool, self.per_partition)

    def _after_entries(self, loaded: LoadedJob, outcome: JobOutcome) -> None:
        if outcome.conflict_mode == "replace":
            conflicts.delete_replaced_output(self.context, loaded.spool, self.per_partition)

    def local_job_dir(self) -> str:
        root = self.options.local_staging_dir or os.path.join(tempfile.gettempdir(), "airflow-commit-staging")
        return os.path.join(root, self.job_id)

    def local_attempt_dir(self, task_attempt_id: str) -> str:
        return os.path.join(self.local_job_dir(), task_attempt_id)


class PartitionedCommitter(StagingCommitter):
    name = "partitioned"
    traits = CommitterTraits(
        family="upload",
        conflicts="partition",
        swaps_partitions=False,
        exclusive_task_commit=True,
        unsafe=False,
        partition_markers=True,
        jvm=JvmCommitter("s3a", records_job_id=True),
    )


class StagingTaskAttempt(TaskAttempt):
    """Keeps nothing per file in memory: only its open streams. Task commit lists the attempt's
    local files in bounded memory and uploads them `UPLOADS_PER_RECORD` at a time (each batch
    recorded before its data is sent), spooling each file's commit, then streams its pendingset to
    a local file and uploads that."""

    committer: StagingCommitter

    def __init__(self, committer: Committer, task: int, attempt: int):
        super().__init__(committer, task, attempt)
        self._lock = threading.Lock()
        self._open: set[PublishOnCloseStream] = set()
        """The streams handed out and not yet closed, discarded or abandoned."""

    @property
    def local_dir(self) -> str:
        return self.committer.local_attempt_dir(self.task_attempt_id)

    def setup_task(self) -> None:
        super().setup_task()
        os.makedirs(self.local_dir, exist_ok=True)

    def create_file(self, relative_path: str) -> PublishOnCloseStream:
        """A local file: closing keeps it for task commit to upload, discarding deletes it."""
        local_path = os.path.join(
            self.local_dir,
            *self.destination_of(relative_path).relative_to(self.committer.destination).split("/"),
        )
        os.makedirs(os.path.dirname(local_path), exist_ok=True)
        stream = LocalFileStream(local_path, local_path, open(local_path, "wb"))  # noqa: SIM115 - the stream owns it
        with self._lock:
            self._open.add(stream)
        stream.on_end = self._forget
        return stream

    def _forget(self, stream: PublishOnCloseStream) -> None:
        with self._lock:
            self._open.discard(stream)

    def _local_files(self) -> Iterator[tuple[str, str]]:
        """(local path, path relative to the attempt's directory) of each of its files, in key
        order, listed through a spool (`LocalStore.list_files`): a task may write 100k files."""
        root = StorePath("file", "", self.local_dir)
        for status in LocalStore().list_files(root):
            yield status.path.key, status.path.relative_to(root)

    def needs_task_commit(self) -> bool:
        return any(True for _ in self._local_files())

    def commit_task(
        self, rows: int | None = None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        ctx = self.context
        # Before any upload: an attempt of a job that is over would send its data in vain and
        # record its uploads in the ended job's tree.
        self._require_active_job()
        for stream in list(self._open):
            stream.discard()  # a stream never closed was never published: it is not task output
        unrecorded: list[tuple[StorePath, str]] = []
        try:
            with RecordLog(prefix="staging-pending-") as pending:
                total_bytes = 0
                for batch in batched(self._local_files(), UPLOADS_PER_RECORD):
                    for _local, relative in batch:
                        dest = self.destination_of(relative)
                        unrecorded.append((dest, ctx.operations.initiate(dest)))
                    record_uploads(ctx, self.task_attempt_id, unrecorded)
                    started, unrecorded = unrecorded, []
                    for commit in self._upload(batch, started):
                        pending.add(commit.to_record())
                        total_bytes += commit.length
                pendingset = PendingSet(
                    self.committer.job_id,
                    self.task_id,
                    self.task_attempt_id,
                    iostatistics=self.store_requests(),
                )
                if rows is not None:
                    pendingset.iostatistics.increment("rows_written", rows)
                record_partition_rows(pendingset.extra_data, partition_rows)
                listed = (PendingCommit(*record) for record in pending)
                summary = self._summary(pending.count, total_bytes, rows)
                with written_manifest(
                    summary, lambda out: write_pendingset(out, pendingset, listed)
                ) as manifest:
                    result = self._publish(manifest)
        except JobNotActiveError:
            raise  # already discarded
        except BaseException:
            if not self._holds_task_commit():
                discard_attempt_uploads(ctx, self.task_attempt_id, unrecorded)
            raise
        if result.adopted_from:
            discard_attempt_uploads(ctx, self.task_attempt_id)
        shutil.rmtree(self.local_dir, ignore_errors=True)
        return result

    def _upload(
        self, files: list[tuple[str, str]], uploads: list[tuple[StorePath, str]]
    ) -> list[PendingCommit]:
        """Send each local file of `files` as the parts of its upload in `uploads`, left pending,
        on the job's threads; their commits in the same order."""
        operations, part_size = self.context.operations, self.context.options.part_size
        commits: list[PendingCommit] = [None] * len(files)  # type: ignore[list-item]

        def upload(index: int) -> None:
            dest, upload_id = uploads[index]
            commits[index] = operations.upload_to_pending(
                dest, upload_id, _chunks(files[index][0], part_size)
            )

        run_parallel(range(len(files)), upload, self.context.options.threads)
        return commits

    def discard_output(self) -> bool:
        shutil.rmtree(self.local_dir, ignore_errors=True)
        if self._holds_task_commit():
            return False  # its uploads are the task's committed output
        discard_attempt_uploads(self.context, self.task_attempt_id)
        return True


def _chunks(local_path: str, part_size: int) -> Iterator[bytes]:
    with open(local_path, "rb") as handle:
        while chunk := handle.read(part_size):
            yield chunk
