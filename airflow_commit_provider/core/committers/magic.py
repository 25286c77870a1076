"""The magic committer: task attempts stream output straight to the final keys as multipart
uploads, in parts as they are written, and job commit completes the uploads of committed tasks."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor, wait
from typing import Any, cast

from airflow_commit_provider.core.commit_operations import CommitOperations
from airflow_commit_provider.core.committers.base import Committer, TaskAttempt
from airflow_commit_provider.core.committers.traits import CommitterTraits, JvmCommitter
from airflow_commit_provider.core.formats.partition_rows import record_partition_rows
from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet, write_pendingset
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import RecordLog
from airflow_commit_provider.core.stages import commit_files
from airflow_commit_provider.core.stages.context import log
from airflow_commit_provider.core.stages.errors import JobNotActiveError
from airflow_commit_provider.core.stages.manifests import decode_pendingset
from airflow_commit_provider.core.stages.task_commit import written_manifest
from airflow_commit_provider.core.stages.uploads import (
    consolidate_upload_records,
    discard_attempt_uploads,
    record_uploads,
)
from airflow_commit_provider.core.store.streams import PublishOnCloseStream


class MagicCommitter(Committer):
    name = "magic"
    required_capabilities = ("multipart_upload", "consistent_listing")
    uses_magic_layout = True
    traits = CommitterTraits(
        family="upload",
        conflicts=None,
        swaps_partitions=False,
        exclusive_task_commit=True,
        unsafe=False,
        partition_markers=False,
        jvm=JvmCommitter("s3a", records_job_id=True),
    )
    decoder = staticmethod(decode_pendingset)
    entry_action = commit_files.complete_uploads

    def task_attempt(self, task: int, attempt: int) -> MagicTaskAttempt:
        return MagicTaskAttempt(self, task, attempt)


class _PartUploads:
    """What the upload threads share with a stream, instead of the stream itself: a stream dropped
    with parts in flight can then be garbage collected, and its finalizer stops the queued parts."""

    def __init__(self, operations: CommitOperations, dest: StorePath, upload_id: str) -> None:
        self.operations = operations
        self.dest = dest
        self.upload_id = upload_id
        self.stopped = False
        self.failure: BaseException | None = None

    def upload(self, number: int, chunk: bytes) -> str:
        """Upload one part, unless the file can no longer be published (discarded, or another part
        failed): sending it would only cost bandwidth."""
        if self.stopped or self.failure is not None:
            raise CancelledError(f"part {number} of {self.dest}: not sent, the file is not published")
        try:
            return self.operations.send_part(self.dest, self.upload_id, number, chunk)
        except BaseException as error:
            self.failure = self.failure or error
            raise


class MagicOutputStream(PublishOnCloseStream):
    """Streams a file to its final key as a multipart upload, keeping `parts_in_flight` parts
    uploading while the task encodes the next, as S3A's block output stream does: uploading one
    part at a time would leave the encoder idle for every part's round trip.

    Memory is bounded, not queued: with the limit reached, `write` waits for the oldest part, so a
    stream holds at most `parts_in_flight` parts plus the one being filled. With one part in
    flight the writer uploads each part itself, as a synchronous stream. The last part is sent
    by `close` itself: a file smaller than a part then never involves a thread.

    A failed part fails the file: later writes and `close` raise its error, nothing is published,
    and the upload is aborted once no part of it is still arriving. Aborting while a part is still
    being sent can leave that part stored (S3 documents aborting again for this), so `discard`
    and a failed `close` first cancel the queued parts and wait for the running ones.
    """

    def __init__(self, attempt: MagicTaskAttempt, dest: StorePath):
        super().__init__(str(dest))
        self._attempt = attempt
        operations = attempt.context.operations
        self.dest = dest
        try:
            self.upload_id = operations.initiate(dest)
        except BaseException:
            self.abandon()
            raise
        try:
            self.record = record_uploads(attempt.context, attempt.task_attempt_id, [(dest, self.upload_id)])
        except BaseException:
            # unrecorded, the upload could never be found again to abort it
            operations.abort_uploads([(dest, self.upload_id)]).checked()
            self.abandon()
            raise
        self._part_size = attempt.context.options.part_size
        self._limit = attempt.context.options.parts_in_flight
        self._uploads = _PartUploads(operations, dest, self.upload_id)
        self._in_flight: deque[Future[str]] = deque()
        self._buffer = bytearray()
        self._etags: list[str] = []
        self._length = 0

    def _write(self, data: Any) -> int:
        self._raise_failure()
        with memoryview(data) as view, view.cast("B") as raw:
            size = raw.nbytes
            offset = 0
            while size - offset >= self._part_size - len(self._buffer):
                # Make room before copying the part out, so the copy is the only extra part held.
                self._make_room()
                end = offset + self._part_size - len(self._buffer)
                if self._buffer:
                    self._buffer += raw[offset:end]
                    chunk = bytes(self._buffer)
                    self._buffer.clear()
                else:
                    chunk = bytes(raw[offset:end])
                offset = end
                self._submit(chunk)
            self._buffer += raw[offset:]
        self._length += size
        return size

    def _make_room(self) -> None:
        while len(self._in_flight) >= self._limit:
            self._take_oldest()
        self._raise_failure()

    def _submit(self, chunk: bytes) -> None:
        number = len(self._etags) + len(self._in_flight) + 1
        pool = self._attempt.part_pool()
        if pool is None:
            self._etags.append(self._uploads.upload(number, chunk))
        else:
            self._in_flight.append(pool.submit(self._uploads.upload, number, chunk))

    def _take_oldest(self) -> None:
        """Wait for the oldest part; ETags are kept in part order whatever order parts finish in.

        Any part's failure is raised, not only this one's: a part skipped after another failed
        has no error of its own, and failing as early as possible sends no more parts in vain.
        """
        oldest = self._in_flight[0]
        oldest.exception()
        self._raise_failure()
        self._etags.append(oldest.result())
        self._in_flight.popleft()

    def _raise_failure(self) -> None:
        if self._uploads.failure is not None:
            raise self._uploads.failure

    def tell(self) -> int:
        return self._length

    def _publish(self) -> None:
        try:
            self._raise_failure()
            last: list[str] = []
            if self._buffer or not (self._etags or self._in_flight):
                chunk = bytes(self._buffer)
                self._buffer.clear()
                last.append(self._uploads.upload(len(self._etags) + len(self._in_flight) + 1, chunk))
            while self._in_flight:
                self._take_oldest()
        except BaseException:
            self._abort_failed()
            raise
        self._attempt.published(
            PendingCommit(
                uri=self.dest.uri(),
                bucket=self.dest.bucket,
                destination_key=self.dest.key,
                upload_id=self.upload_id,
                etags=(*self._etags, *last),
                length=self._length,
            )
        )

    def _abort_failed(self) -> None:
        """After a failed close: the file can never be published, so its parts need not wait for
        task abort. Should the abort fail too, the recorded upload is left to task abort or job
        cleanup, and the close's own error is the one raised."""
        try:
            self._discard()
        except Exception:
            log.warning(
                "could not abort upload %s of %s after a failed close",
                self.upload_id,
                self.dest,
                exc_info=True,
            )

    def _discard(self) -> None:
        self._buffer.clear()
        self.stop_parts()
        self._attempt.context.operations.abort_uploads([(self.dest, self.upload_id)]).checked()

    def stop_parts(self) -> None:
        """Cancel the queued parts and wait for those being sent (their errors no longer matter)."""
        self._uploads.stopped = True
        # wait() counts a cancelled part as done only once a worker dequeues it: wait for the rest
        wait([part for part in self._in_flight if not part.cancel()])
        self._in_flight.clear()

    def abandon(self) -> None:
        # From a finalizer: stop the queued parts without waiting for the running ones (no
        # blocking there); construction may have failed before there were any.
        uploads: _PartUploads | None = getattr(self, "_uploads", None)
        if uploads is not None:
            uploads.stopped = True
        super().abandon()


class MagicTaskAttempt(TaskAttempt):
    """An attempt keeps nothing per file in memory (HADOOP-19047: S3A's magic committer holds every
    file's commit data until task commit, and builds its pendingset whole): only its open streams,
    and in local spools every upload it started and the commit of every file it closed, from which
    task commit streams its pendingset to a local file and uploads that."""

    def __init__(self, committer: Committer, task: int, attempt: int):
        super().__init__(committer, task, attempt)
        self._lock = threading.Lock()
        self._open: set[MagicOutputStream] = set()
        """The streams handed out and not yet closed, discarded or abandoned."""
        self._uploads = RecordLog(prefix="magic-uploads-")
        """(destination URI, upload ID, its record's URI) of every upload the attempt started."""
        self._pending = RecordLog(prefix="magic-pending-")
        """The commit of every file closed (`PendingCommit.to_record`): what its pendingset lists."""
        self._pending_bytes = 0
        self._part_pool: ThreadPoolExecutor | None = None

    def part_pool(self) -> Executor | None:
        """The threads that upload this attempt's parts (None: the writer uploads them itself).

        One pool per attempt, not per stream or per process: a task may open many files, and
        threads per file would multiply with them, while a pool of `parts_in_flight` workers
        bounds the task's concurrent requests whatever it opens. Like every pool here it lives no
        longer than its attempt (HADOOP-16798): commit and abort shut it down once every part is
        settled. It is made at the first full part, so a task of small files starts no thread.
        """
        if self.context.options.parts_in_flight == 1:
            return None
        if self._part_pool is None:
            self._part_pool = ThreadPoolExecutor(
                max_workers=self.context.options.parts_in_flight, thread_name_prefix="magic-part"
            )
        return self._part_pool

    def _release_part_pool(self) -> None:
        if self._part_pool is not None:
            self._part_pool.shutdown(wait=False)
            self._part_pool = None

    def create_file(self, relative_path: str) -> MagicOutputStream:
        stream = MagicOutputStream(self, self.destination_of(relative_path))
        record = stream.record.uri() if stream.record else None
        with self._lock:
            self._uploads.add((stream.dest.uri(), stream.upload_id, record))
            self._open.add(stream)
        stream.on_end = self._forget
        return stream

    def _forget(self, stream: PublishOnCloseStream) -> None:
        with self._lock:
            self._open.discard(cast(MagicOutputStream, stream))  # only its own streams call it

    def published(self, commit: PendingCommit) -> None:
        """Keep the commit of a file just closed, for the pendingset."""
        with self._lock:
            self._pending.add(commit.to_record())
            self._pending_bytes += commit.length

    def pending_commits(self) -> Iterator[PendingCommit]:
        """The commit of each file closed so far, in the order they closed: what the pendingset
        lists (read back from the spool, one batch in memory at a time)."""
        return (PendingCommit(*record) for record in self._pending)

    def needs_task_commit(self) -> bool:
        return self._pending.count > 0 or bool(self._open)

    def commit_task(
        self, rows: int | None = None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        for stream in list(self._open):
            stream.discard()
        self._release_part_pool()
        pendingset = PendingSet(
            self.committer.job_id, self.task_id, self.task_attempt_id, iostatistics=self.store_requests()
        )
        if rows is not None:
            pendingset.iostatistics.increment("rows_written", rows)
        record_partition_rows(pendingset.extra_data, partition_rows)
        commits = self.pending_commits()
        summary = self._summary(self._pending.count, self._pending_bytes, rows)
        try:
            with written_manifest(
                summary, lambda out: write_pendingset(out, pendingset, commits)
            ) as manifest:
                if self._uploads.count > 1:
                    consolidate_upload_records(
                        self.context,
                        self.task_attempt_id,
                        ((StorePath.from_uri(dest), upload) for dest, upload, _record in self._uploads),
                        (StorePath.from_uri(record) for _dest, _upload, record in self._uploads if record),
                    )
                result = self._publish(manifest)
        except JobNotActiveError:
            raise  # already discarded
        except BaseException:
            self.abort_task()
            raise
        if result.adopted_from:
            self.discard_output()
        self._close_spools()
        return result

    def discard_output(self) -> bool:
        # Before any abort: a part still arriving could outlive the abort of its upload.
        for stream in list(self._open):
            stream.abandon()
            stream.stop_parts()
        self._release_part_pool()
        if self._holds_task_commit():
            return False  # its uploads are the task's committed output
        discard_attempt_uploads(
            self.context,
            self.task_attempt_id,
            ((StorePath.from_uri(dest), upload) for dest, upload, _record in self._uploads),
        )
        self._close_spools()
        return True

    def _close_spools(self) -> None:
        """Once committed or discarded: every upload is in the store's records (task abort and job
        cleanup find them there), and the pendingset is written."""
        with self._lock:
            self._uploads.close()
            self._pending.close()
            self._pending_bytes = 0
