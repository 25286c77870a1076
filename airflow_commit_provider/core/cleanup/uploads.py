"""Finding and aborting pending multipart uploads: billed, invisible, left by failed jobs.

Scopes are directories, never plain prefixes (`out/dataset1` must not match `out/dataset10`),
and an upload that vanished meanwhile (completed or aborted by someone else: NoSuchUpload) is
counted, not treated as an error. S3 says an abort racing with part uploads may need repeating,
so each abort is verified with ListParts and repeated while parts are still there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from airflow_commit_provider.core.cleanup.common import (
    NoProgress,
    Progress,
    iso,
    one_line,
    parallel_map,
    with_retries,
)
from airflow_commit_provider.core.cleanup.durations import DEFAULT_OLDER_THAN
from airflow_commit_provider.core.cleanup.reports import FAILED, CleanupReport, ScopedListing
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import NoSuchUploadError, Store, StoreError

ABORTED, VANISHED, WOULD_ABORT = "aborted", "vanished", "would-abort"
#: Options of `abort_uploads` that `abort_pending_uploads` passes on to it.
_RETRY_SETTINGS = ("attempts", "retry_delay", "verify_rounds")


@dataclass(frozen=True)
class UploadInfo:
    path: StorePath
    upload_id: str
    initiated: float
    """Epoch seconds, as the store reported it."""
    age_seconds: float
    parts: int | None = None
    bytes: int | None = None
    """Bytes in its parts (ListParts): what aborting it reclaims."""

    def to_json(self) -> dict[str, Any]:
        return {
            "url": str(self.path),
            "key": self.path.key,
            "upload_id": self.upload_id,
            "initiated": iso(self.initiated),
            "age_seconds": round(self.age_seconds, 3),
            "parts": self.parts,
            "bytes": self.bytes,
        }


@dataclass
class UploadListing(ScopedListing):
    """The uploads a cleanup would act on, and how many others it saw and left alone."""

    uploads: list[UploadInfo] = field(default_factory=list)
    too_recent: int = 0
    vanished: int = 0
    """Uploads that disappeared between listing and ListParts."""

    @property
    def total_bytes(self) -> int:
        return sum(upload.bytes or 0 for upload in self.uploads)

    @property
    def total_parts(self) -> int:
        return sum(upload.parts or 0 for upload in self.uploads)

    def to_json(self, sample: int | None = None) -> dict[str, Any]:
        shown = self.uploads if sample is None else self.uploads[:sample]
        return {
            **self.selection_json(),
            "count": len(self.uploads),
            "bytes": self.total_bytes,
            "parts": self.total_parts,
            "too_recent": self.too_recent,
            "other_jobs": self.other_jobs,
            "vanished": self.vanished,
            "uploads": [upload.to_json() for upload in shown],
        }


@dataclass(frozen=True)
class AbortOutcome:
    upload: UploadInfo
    status: str
    """One of aborted, vanished, failed, would-abort."""
    attempts: int = 0
    repeats: int = 0
    """Extra aborts because parts were still there after the first one."""
    error: str | None = None

    @property
    def label(self) -> str:
        return self.upload.path.key

    def failure_json(self) -> dict[str, Any]:
        return {"key": self.upload.path.key, "upload_id": self.upload.upload_id, "error": self.error}

    def to_json(self) -> dict[str, Any]:
        return {**self.upload.to_json(), "status": self.status, "repeats": self.repeats, "error": self.error}


class AbortReport(CleanupReport[UploadListing, AbortOutcome]):
    ACTED = (ABORTED, WOULD_ABORT)
    DETAILS = "uploads"

    @property
    def aborted(self) -> int:
        return self.count(ABORTED)

    @property
    def vanished(self) -> int:
        return self.count(VANISHED) + self.listing.vanished

    @property
    def bytes_reclaimed(self) -> int:
        """Bytes of the uploads aborted (or, in a dry run, that would be)."""
        return sum(o.upload.bytes or 0 for o in self.acted)

    def _counts(self, acted: list[AbortOutcome]) -> dict[str, Any]:
        return {
            "listed": len(self.listing.uploads),
            "aborted": self.aborted,
            "would_abort": self.count(WOULD_ABORT),
            "vanished": self.vanished,
            "failed": len(self.failed),
            "repeated_aborts": sum(o.repeats for o in self.outcomes),
            "bytes": self.bytes_reclaimed,
            "parts": sum(o.upload.parts or 0 for o in acted),
            "too_recent": self.listing.too_recent,
            "other_jobs": self.listing.other_jobs,
        }


def list_pending_uploads(
    store: Store,
    scope: str | StorePath,
    *,
    older_than: timedelta | str | float = DEFAULT_OLDER_THAN,
    job_id: str | None = None,
    now: datetime | None = None,
    allow_bucket_root: bool = False,
    sizes: bool = True,
    threads: int = 16,
    progress: Progress | None = None,
) -> UploadListing:
    """Pending uploads under the `scope` directory initiated at least `older_than` before `now`.

    With `job_id`, only uploads whose key contains it or that the job recorded under its job
    directory. With `sizes`, each upload's parts and bytes come from ListParts (in parallel).
    """
    listing = UploadListing.select(
        scope, older_than=older_than, job_id=job_id, now=now, allow_bucket_root=allow_bucket_root
    )
    if job_id is not None:
        validate_job_id(job_id)
    directory = listing.scope
    progress = progress or NoProgress()
    clock = listing.now.timestamp()
    candidates: list[UploadInfo] = []
    progress.start("Listing uploads", None)
    for pending in store.list_multipart_uploads(directory):
        progress.advance()
        if not pending.path.is_under(directory):  # never trust the store's prefix match alone
            continue
        info = UploadInfo(pending.path, pending.upload_id, pending.initiated, clock - pending.initiated)
        if info.age_seconds < listing.older_than.total_seconds():
            listing.too_recent += 1
        else:
            candidates.append(info)
    if job_id is not None:
        recorded = _recorded_upload_ids(store, directory, job_id, candidates, threads)
        mine = [u for u in candidates if job_id in u.path.key or u.upload_id in recorded]
        listing.other_jobs = len(candidates) - len(mine)
        candidates = mine
    if not sizes:
        listing.uploads = candidates
        return listing
    progress.start("Measuring uploads", len(candidates))
    for info in parallel_map(candidates, lambda u: _measure(store, u), threads, progress):
        if info is None:
            listing.vanished += 1
        else:
            listing.uploads.append(info)
    return listing


def _measure(store: Store, info: UploadInfo) -> UploadInfo | None:
    try:
        parts = store.list_parts(info.path, info.upload_id)
    except NoSuchUploadError:
        return None
    return UploadInfo(
        info.path, info.upload_id, info.initiated, info.age_seconds, len(parts), sum(p.size for p in parts)
    )


def _recorded_upload_ids(
    store: Store, scope: StorePath, job_id: str, uploads: list[UploadInfo], threads: int
) -> set[str]:
    """Upload IDs in the job's own records (`<jobdir>/00/uploads/`) wherever its job dir can be.

    A job dir sits in the destination, which is the scope, one of its parents, or a directory
    between the scope and an upload; records are only read, so looking above the scope is safe.
    """
    destinations = {scope}
    parent = scope
    while parent.key.strip("/") and parent.parent != parent:
        parent = parent.parent
        destinations.add(parent)
    for upload in uploads:
        directory = upload.path.parent
        while directory.is_under(scope):
            destinations.add(directory)
            directory = directory.parent
    record_dirs = [
        JobLayout(destination, job_id, magic).upload_records_dir()
        for destination in sorted(destinations)
        for magic in (False, True)
    ]
    found: set[str] = set()
    for ids in parallel_map(record_dirs, lambda d: _read_records(store, d), threads):
        found |= ids
    return found


def _read_records(store: Store, records_dir: StorePath) -> set[str]:
    ids: set[str] = set()
    for status in store.list_files(records_dir):
        try:
            records = json.loads(store.read_bytes(status.path))
            ids.update(str(record["uploadId"]) for record in records)
        except (StoreError, ValueError, KeyError, TypeError):
            continue  # a record being written or removed right now; the key check still applies
    return ids


def abort_uploads(
    store: Store,
    listing: UploadListing,
    *,
    dry_run: bool = False,
    threads: int = 16,
    attempts: int = 3,
    retry_delay: float = 0.5,
    verify_rounds: int = 3,
    progress: Progress | None = None,
) -> AbortReport:
    """Abort every upload in `listing` in parallel; with `dry_run`, only report them."""
    return AbortReport.run(
        listing,
        listing.uploads,
        lambda upload: abort_one(store, upload, attempts, retry_delay, verify_rounds),
        lambda upload: AbortOutcome(upload, WOULD_ABORT),
        dry_run=dry_run,
        description="Aborting uploads",
        threads=threads,
        progress=progress,
    )


def abort_one(
    store: Store, upload: UploadInfo, attempts: int = 3, retry_delay: float = 0.5, verify_rounds: int = 3
) -> AbortOutcome:
    """Abort, then check with ListParts that no parts survived, repeating the abort if some did."""
    path, upload_id = upload.path, upload.upload_id
    try:
        _, used = with_retries(lambda: store.abort_multipart_upload(path, upload_id), attempts, retry_delay)
    except NoSuchUploadError:
        return AbortOutcome(upload, VANISHED, 1)
    except StoreError as error:
        return AbortOutcome(upload, FAILED, attempts, error=one_line(error))
    repeats = 0
    while True:
        try:
            remaining, _ = with_retries(lambda: store.list_parts(path, upload_id), attempts, retry_delay)
        except NoSuchUploadError:
            return AbortOutcome(upload, ABORTED, used, repeats)
        except StoreError as error:
            return AbortOutcome(upload, FAILED, used, repeats, f"abort not verified: {one_line(error)}")
        if not remaining:
            return AbortOutcome(upload, ABORTED, used, repeats)
        if repeats >= verify_rounds:
            return AbortOutcome(
                upload, FAILED, used, repeats, f"{len(remaining)} parts remain after {repeats + 1} aborts"
            )
        repeats += 1
        try:
            store.abort_multipart_upload(path, upload_id)
        except NoSuchUploadError:
            return AbortOutcome(upload, ABORTED, used, repeats)
        except StoreError as error:
            return AbortOutcome(upload, FAILED, used, repeats, one_line(error))


def abort_pending_uploads(
    store: Store,
    scope: str | StorePath,
    *,
    dry_run: bool = False,
    threads: int = 16,
    progress: Progress | None = None,
    **options: Any,
) -> AbortReport:
    """List then abort (or, with `dry_run`, report) the stale uploads under `scope`.

    `options` are those of `list_pending_uploads` (older_than, job_id, now, ...) and the retry
    settings of `abort_uploads` (attempts, retry_delay, verify_rounds).
    """
    retries = {name: options.pop(name) for name in _RETRY_SETTINGS if name in options}
    listing = list_pending_uploads(store, scope, threads=threads, progress=progress, **options)
    return abort_uploads(store, listing, dry_run=dry_run, threads=threads, progress=progress, **retries)
