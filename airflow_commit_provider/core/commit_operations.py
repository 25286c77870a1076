"""S3's commit operations in one place, as Hadoop keeps S3A's in `CommitOperations`: initiate an
upload, send its parts, complete or abort uploads in batches, list those pending.

The stages and committers make these calls only through `CommitOperations`; they never call the
store's multipart methods themselves (tests/core/test_commit_operations.py checks their source).
So there is one place that decides how a batch is sent (overlapped from one thread when the store
pipelines its requests, as S3 over the CRT does, else on a bounded pool of threads), which
answers mean success (an upload already completed by an earlier commit of the same job, or
already aborted), and what a batch reports: a `BatchOutcome` value, with the failures named, not
an exception each caller collects for itself.

It works over the narrow `Store` interface only, so the local store's multipart emulation and both
S3 request paths (boto3 and awscrt, `s3_requests`) are behind it alike. It knows nothing of jobs,
layouts or records (which uploads to complete or abort is the caller's to decide), so it sits in a
layer of core's own (pyproject's "Core: one-way between its parts"): above the store and the
formats (an upload to a pending commit gives a `PendingCommit`), below the stages and committers
that call it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_commit_provider.core.formats.pending import PendingCommit
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.parallel import ProgressCallback, run_parallel, run_pipelined
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import NoSuchUploadError, PendingUpload, Store, StoreError

T = TypeVar("T")

#: Failures a `BatchOutcome` names one by one; beyond them it only counts. A batch that keeps going
#: past failures (an abort of a million uploads against a failing endpoint) stays small.
FAILURES_NAMED = 100


@dataclass(frozen=True)
class UploadToComplete:
    """A pending upload to complete, and the size its object must have: what lets a completion
    whose upload is gone count as done by an earlier commit, not as lost."""

    path: StorePath
    upload_id: str
    etags: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class UploadFailure:
    """One upload a batch could not complete or abort, and why."""

    path: StorePath
    upload_id: str
    error: Exception


@dataclass(frozen=True)
class BatchOutcome:
    """What one batch of completions or aborts did.

    `completed` were made visible now, `recovered` had been by an earlier, interrupted commit (the
    upload gone, the object there with the expected size); `aborted` were cancelled now,
    `already_gone` were completed or aborted before. `failed` counts the rest; `failures` names
    the first `FAILURES_NAMED` of them, the first to fail first.
    """

    completed: int = 0
    recovered: int = 0
    completed_bytes: int = 0
    """The bytes of the objects completed or recovered."""
    aborted: int = 0
    already_gone: int = 0
    failed: int = 0
    failures: tuple[UploadFailure, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failed == 0

    @property
    def settled(self) -> int:
        """Uploads that are no longer pending: completed, recovered, aborted or already gone."""
        return self.completed + self.recovered + self.aborted + self.already_gone

    def checked(self) -> BatchOutcome:
        """This outcome, once no upload failed; else the first failure's own error (the store's,
        naming its path) is raised, for callers to which any failure is the batch's failure."""
        if self.failures:
            raise self.failures[0].error
        return self


class UploadGoneError(StoreError):
    """A completion found its upload gone and the object not there as expected (missing, or of
    another size): neither this commit nor an earlier one made it visible."""


class CommitOperations:
    """The commit operations over one store, counted in `statistics` and run on `threads`.

    Batches stop at their first failure unless told to keep going: a job commit that cannot
    complete one upload fails rather than making more of a partial output visible, while an abort
    meant to leave nothing behind (a Hadoop job's leftovers) tries every upload.
    """

    def __init__(self, store: Store, statistics: IOStatistics | None = None, threads: int = 1) -> None:
        self.store = store
        self.statistics = statistics if statistics is not None else IOStatistics()
        self.threads = threads

    # One upload --------------------------------------------------------------------------------
    def initiate(self, path: StorePath) -> str:
        """Start a multipart upload at `path`; its upload ID."""
        return self.store.create_multipart_upload(path)

    def send_part(self, path: StorePath, upload_id: str, number: int, data: bytes) -> str:
        """Upload part `number` (from 1) of a pending upload; its ETag."""
        return self.store.upload_part(path, upload_id, number, data)

    def upload_to_pending(self, path: StorePath, upload_id: str, chunks: Iterable[bytes]) -> PendingCommit:
        """Send `chunks` as consecutive parts of the upload, leaving it pending (Hadoop's
        `uploadFileToPendingCommit`): the commit that job commit completes. No chunks is one
        empty part, so an empty file still completes."""
        etags = []
        length = 0
        for number, chunk in enumerate(chunks, start=1):
            etags.append(self.send_part(path, upload_id, number, chunk))
            length += len(chunk)
        if not etags:
            etags.append(self.send_part(path, upload_id, 1, b""))
        return PendingCommit(
            uri=path.uri(),
            bucket=path.bucket,
            destination_key=path.key,
            upload_id=upload_id,
            etags=tuple(etags),
            length=length,
        )

    # Listing -------------------------------------------------------------------------------------
    def list_pending(self, destination: StorePath) -> Iterator[PendingUpload]:
        """The uploads pending under `destination` (directory boundaries: `out/d1` is not
        `out/d10`), in no set order."""
        return self.store.list_multipart_uploads(destination)

    # Batches ---------------------------------------------------------------------------------------
    def complete_uploads(
        self,
        uploads: Iterable[UploadToComplete],
        *,
        total: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchOutcome:
        """Complete every upload (streamed: a million hold one per request in flight). An upload
        already gone counts as recovered when its object has the expected size, and fails with an
        `UploadGoneError` otherwise. Stops at the first failure."""

        def start(upload: UploadToComplete) -> Future[object]:
            request = self.store.start_complete_multipart_upload(
                upload.path, upload.upload_id, list(upload.etags)
            )
            return self.statistics.timed_future("committer_materialize_file", request)

        def settle(upload: UploadToComplete, request: Future[object], tally: _Tally) -> None:
            try:
                request.result()
            except NoSuchUploadError:
                self._check_already_complete(upload)
                self.statistics.increment("commit_file_recovered")
                tally.add(recovered=1, completed_bytes=upload.size)
                return
            tally.add(completed=1, completed_bytes=upload.size)

        return self._each(
            uploads,
            lambda upload: (upload.path, upload.upload_id),
            start,
            settle,
            keep_going=False,
            total=total,
            progress=progress,
        )

    def abort_uploads(
        self, uploads: Iterable[tuple[StorePath, str]], *, keep_going: bool = False
    ) -> BatchOutcome:
        """Abort every (path, upload ID); one already completed or aborted counts as already gone.
        Stops at the first failure unless `keep_going`."""

        def start(upload: tuple[StorePath, str]) -> Future[None]:
            return self.store.start_abort_multipart_upload(*upload)

        def settle(_upload: tuple[StorePath, str], request: Future[None], tally: _Tally) -> None:
            try:
                request.result()
            except NoSuchUploadError:
                self.statistics.increment("committer_uploads_already_gone")
                tally.add(already_gone=1)
                return
            self.statistics.increment("committer_uploads_aborted")
            tally.add(aborted=1)

        return self._each(uploads, lambda upload: upload, start, settle, keep_going=keep_going)

    def _check_already_complete(self, upload: UploadToComplete) -> None:
        status = self.store.get_status(upload.path)
        if status is None or status.size != upload.size:
            found = "is missing" if status is None else f"has {status.size} bytes, not {upload.size}"
            raise UploadGoneError(
                f"cannot commit {upload.path}: upload {upload.upload_id} is gone and the destination {found}"
            )

    def _each(
        self,
        items: Iterable[Any],
        named: Callable[[Any], tuple[StorePath, str]],
        start: Callable[[Any], Future[Any]],
        settle: Callable[[Any, Future[Any], _Tally], None],
        *,
        keep_going: bool,
        total: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchOutcome:
        """Send one request per item (`named` gives its path and upload ID) and settle each answer
        into the outcome: from one thread with `threads` in flight when the store pipelines
        requests, else on `threads` workers.

        An item's failure (any `Exception` from its request or its settling) is recorded, not
        raised; unless `keep_going` it stops new requests, those in flight still settle. Anything
        else (a `BaseException` such as an interrupt) propagates as it would from one call.
        """
        tally = _Tally()

        def sent() -> Iterator[Any]:
            for item in items:
                if tally.failed and not keep_going:
                    return
                yield item

        def settled(item: Any, request: Future[Any]) -> None:
            try:
                settle(item, request, tally)
            except Exception as error:
                path, upload_id = named(item)
                tally.fail(UploadFailure(path, upload_id, error))

        def started(item: Any) -> Future[Any]:
            try:
                return start(item)
            except Exception as error:  # a request that failed before it was sent settles the same way
                failed: Future[Any] = Future()
                failed.set_exception(error)
                return failed

        if self.store.pipelines_requests:
            run_pipelined(sent(), started, settled, self.threads, total=total, progress=progress)
        else:
            run_parallel(
                sent(),
                lambda item: settled(item, started(item)),
                self.threads,
                total=total,
                progress=progress,
            )
        return tally.outcome()


class _Tally:
    """A batch's counts as its requests settle, from any of its threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"completed": 0, "recovered": 0, "completed_bytes": 0, "aborted": 0, "already_gone": 0}
        self.failed = 0
        self._failures: list[UploadFailure] = []

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, amount in counts.items():
                self._counts[name] += amount

    def fail(self, failure: UploadFailure) -> None:
        with self._lock:
            self.failed += 1
            if len(self._failures) < FAILURES_NAMED:
                self._failures.append(failure)

    def outcome(self) -> BatchOutcome:
        with self._lock:
            return BatchOutcome(**self._counts, failed=self.failed, failures=tuple(self._failures))
