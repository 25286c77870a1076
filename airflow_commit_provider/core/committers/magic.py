"""The magic committer: task attempts stream output straight to the final keys as multipart
uploads, in parts as they are written, and job commit completes the uploads of committed tasks."""

from __future__ import annotations

from airflow_commit_provider.core.committers.base import Committer, TaskAttempt
from airflow_commit_provider.core.committers.traits import CommitterTraits, JvmCommitter
from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import commit_files
from airflow_commit_provider.core.stages.errors import JobNotActiveError
from airflow_commit_provider.core.stages.manifests import decode_pendingset
from airflow_commit_provider.core.stages.uploads import (
    abort_uploads,
    consolidate_upload_records,
    discard_attempt_uploads,
    record_uploads,
)
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.streams import PublishOnCloseStream


class MagicCommitter(Committer):
    name = "magic"
    required_capabilities = ("multipart_upload", "consistent_listing")
    uses_magic_layout = True
    traits = CommitterTraits(
        family="upload",
        conflicts=None,
        exclusive_task_commit=True,
        unsafe=False,
        partition_markers=False,
        jvm=JvmCommitter("s3a", records_job_id=True),
    )
    decoder = staticmethod(decode_pendingset)
    entry_action = staticmethod(commit_files.complete_upload)

    def task_attempt(self, task: int, attempt: int) -> MagicTaskAttempt:
        return MagicTaskAttempt(self, task, attempt)


class MagicOutputStream(PublishOnCloseStream):
    """Buffers one part at a time and uploads it as soon as it is full: memory stays at one part.

    Closing leaves the upload pending for job commit; discarding aborts it.
    """

    def __init__(self, attempt: MagicTaskAttempt, dest: StorePath):
        super().__init__(str(dest))
        self._attempt = attempt
        self._store: Store = attempt.store
        self.dest = dest
        try:
            self.upload_id = self._store.create_multipart_upload(dest)
        except BaseException:
            self.abandon()
            raise
        try:
            self.record = record_uploads(attempt.context, attempt.task_attempt_id, [(dest, self.upload_id)])
        except BaseException:
            # unrecorded, the upload could never be found again to abort it
            abort_uploads(attempt.context, [(dest, self.upload_id)])
            self.abandon()
            raise
        self._part_size = attempt.context.options.part_size
        self._buffer = bytearray()
        self._etags: list[str] = []
        self._length = 0

    def _write(self, data: bytes) -> int:
        self._buffer += data
        self._length += len(data)
        while len(self._buffer) >= self._part_size:
            self._upload(bytes(self._buffer[: self._part_size]))
            del self._buffer[: self._part_size]
        return len(data)

    def _upload(self, chunk: bytes) -> None:
        self._etags.append(self._store.upload_part(self.dest, self.upload_id, len(self._etags) + 1, chunk))

    def tell(self) -> int:
        return self._length

    def _publish(self) -> None:
        if self._buffer or not self._etags:
            self._upload(bytes(self._buffer))
            self._buffer.clear()
        self._attempt.pending.append(
            PendingCommit(
                uri=self.dest.uri(),
                bucket=self.dest.bucket,
                destination_key=self.dest.key,
                upload_id=self.upload_id,
                etags=tuple(self._etags),
                length=self._length,
            )
        )

    def _discard(self) -> None:
        self._buffer.clear()
        abort_uploads(self._attempt.context, [(self.dest, self.upload_id)])


class MagicTaskAttempt(TaskAttempt):
    def __init__(self, committer: Committer, task: int, attempt: int):
        super().__init__(committer, task, attempt)
        self.pending: list[PendingCommit] = []
        self._streams: list[MagicOutputStream] = []

    def create_file(self, relative_path: str) -> MagicOutputStream:
        stream = MagicOutputStream(self, self.destination_of(relative_path))
        self._streams.append(stream)
        return stream

    def needs_task_commit(self) -> bool:
        return bool(self.pending) or any(not stream.closed for stream in self._streams)

    def commit_task(self, rows: int | None = None) -> TaskCommitResult:
        unclosed = [stream for stream in self._streams if not stream.closed]
        for stream in unclosed:
            stream.discard()
        pendingset = PendingSet(
            self.committer.job_id,
            self.task_id,
            self.task_attempt_id,
            list(self.pending),
            iostatistics=self.store_requests(),
        )
        if rows is not None:
            pendingset.iostatistics.increment("rows_written", rows)
        data = pendingset.to_bytes()
        try:
            consolidate_upload_records(
                self.context,
                self.task_attempt_id,
                [(stream.dest, stream.upload_id) for stream in self._streams],
                [stream.record for stream in self._streams if stream.record],
            )
            result = self._publish(decode_pendingset(data, self.task_attempt_id), data)
        except JobNotActiveError:
            raise  # already discarded
        except BaseException:
            self.abort_task()
            raise
        if result.adopted_from:
            self.abort_task()
        return result

    def abort_task(self) -> None:
        if self._holds_task_commit():
            return  # its uploads are the task's committed output
        uploads = {(stream.dest, stream.upload_id) for stream in self._streams}
        discard_attempt_uploads(self.context, self.task_attempt_id, uploads)
        self.pending.clear()
