"""Finding and aborting pending multipart uploads: billed, invisible, left by failed jobs.

Scopes are directories, never plain prefixes (`out/dataset1` must not match `out/dataset10`).
Each upload gets one AbortMultipartUpload; transient errors are retried. S3 says an abort racing
with part uploads may need repeating, so the scope is listed again afterwards (one request per
1,000 pending uploads, not one per upload) and any upload we aborted that is still listed is
aborted again, for a few rounds, then reported failed.

An upload that vanished meanwhile (completed or aborted by someone else) is counted, not treated
as an error: when measuring finds it gone, or when the abort answers NoSuchUpload (AWS's 404).
Stores that answer a gone upload's abort with 204 instead (SeaweedFS) report it as aborted.

Sizes (parts and bytes, from one ListParts per upload) double the requests: listings and dry
runs measure them, real aborts only when asked. Unmeasured bytes are null, never 0.

Uploads of a job past its commit point but not yet committed (COMMITTING) are never aborted,
however old: rolling that job forward completes them (see `committing`). They are counted in
`committing`; finishing the job (a retry, `job_control.finish_or_fence`) lets them go.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from airflow_commit_provider.core.cleanup.committing import committing_jobs
from airflow_commit_provider.core.cleanup.common import (
    NoProgress,
    Progress,
    format_size,
    iso,
    one_line,
    with_retries,
)
from airflow_commit_provider.core.cleanup.durations import DEFAULT_OLDER_THAN
from airflow_commit_provider.core.cleanup.reports import FAILED, CleanupReport, ScopedListing
from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.parallel import parallel_map, run_pipelined
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError
from airflow_commit_provider.core.stages.uploads import hadoop_pending_uploads, parse_upload_records
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
    """Bytes in its parts (ListParts): what aborting it reclaims; None when not measured."""

    @property
    def identity(self) -> tuple[str, str]:
        """What identifies the upload in a later listing of its directory."""
        return self.path.key, self.upload_id

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
    committing: int = 0
    """Old uploads kept because their job is past its commit point and must be rolled forward."""
    vanished: int = 0
    """Uploads that disappeared between listing and ListParts."""
    sizes_measured: bool = False
    """Whether each upload's parts and bytes were measured (one ListParts per upload)."""

    @property
    def total_bytes(self) -> int | None:
        """Bytes in the uploads' parts; None when sizes were not measured."""
        return _total([upload.bytes for upload in self.uploads], self.sizes_measured)

    @property
    def total_parts(self) -> int | None:
        return _total([upload.parts for upload in self.uploads], self.sizes_measured)

    def to_json(self, sample: int | None = None) -> dict[str, Any]:
        shown = self.uploads if sample is None else self.uploads[:sample]
        return {
            **self.selection_json(),
            "count": len(self.uploads),
            "sizes_measured": self.sizes_measured,
            "bytes": self.total_bytes,
            "parts": self.total_parts,
            "too_recent": self.too_recent,
            "committing": self.committing,
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
    """AbortMultipartUpload requests sent for it, retries and repeats included."""
    repeats: int = 0
    """Extra aborts because the upload was still listed after the previous one."""
    error: str | None = None

    @property
    def label(self) -> str:
        return self.upload.path.key

    def failure_json(self) -> dict[str, Any]:
        return {"key": self.upload.path.key, "upload_id": self.upload.upload_id, "error": self.error}

    def to_json(self) -> dict[str, Any]:
        return {**self.upload.to_json(), "status": self.status, "repeats": self.repeats, "error": self.error}


class AbortReport(CleanupReport[UploadListing, AbortOutcome]):
    """What aborting a listing's uploads did. `vanished` counts uploads found gone (measuring,
    or NoSuchUpload from the abort); a store that answers 204 for a gone upload (SeaweedFS)
    makes it count as aborted. `bytes` and `parts` are None when sizes were not measured.
    """

    ACTED = (ABORTED, WOULD_ABORT)
    DETAILS = "uploads"
    ACTION = ("abort", "aborted")
    ITEMS = "{} uploads"

    @property
    def aborted(self) -> int:
        return self.count(ABORTED)

    @property
    def vanished(self) -> int:
        return self.count(VANISHED) + self.listing.vanished

    @property
    def bytes_reclaimed(self) -> int | None:
        """Bytes of the uploads aborted (or, in a dry run, that would be); None if not measured."""
        return _total([o.upload.bytes for o in self.acted], self.listing.sizes_measured)

    def _counts(self, acted: list[AbortOutcome]) -> dict[str, Any]:
        return {
            "listed": len(self.listing.uploads),
            "aborted": self.aborted,
            "would_abort": self.count(WOULD_ABORT),
            "vanished": self.vanished,
            "failed": len(self.failed),
            "repeated_aborts": sum(o.repeats for o in self.outcomes),
            "sizes_measured": self.listing.sizes_measured,
            "bytes": self.bytes_reclaimed,
            "parts": _total([o.upload.parts for o in acted], self.listing.sizes_measured),
            "too_recent": self.listing.too_recent,
            "committing": self.listing.committing,
            "other_jobs": self.listing.other_jobs,
        }

    def _details(self, counts: dict[str, Any]) -> str:
        sizes = (
            "sizes not measured (--sizes or measure_sizes=True measure them)"
            if counts["bytes"] is None
            else f"{format_size(counts['bytes'])} in {counts['parts']} parts"
        )
        return (
            f"{sizes}; {counts['vanished']} vanished meanwhile, {counts['too_recent']} too recent, "
            f"{counts['other_jobs']} of other jobs, {counts['committing']} kept for jobs past their "
            "commit point"
        )


def _total(values: list[int | None], measured: bool) -> int | None:
    return sum(value or 0 for value in values) if measured else None


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
    directory: our records, or the ``.pending``/``.pendingset`` files of Hadoop's S3A magic
    committer (whose upload keys carry no job ID). With `sizes`, each upload's parts and bytes come from ListParts (in parallel).
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
    if candidates:
        kept = _of_committing_jobs(store, directory, candidates, threads)
        listing.committing = len(kept)
        candidates = [u for u in candidates if u.identity not in kept]
    if not sizes:
        listing.uploads = candidates
        return listing
    listing.sizes_measured = True
    progress.start("Measuring uploads", len(candidates))
    for measured in parallel_map(candidates, lambda u: _measure(store, u), threads, progress):
        if measured is None:
            listing.vanished += 1
        else:
            listing.uploads.append(measured)
    return listing


def _measure(store: Store, info: UploadInfo) -> UploadInfo | None:
    try:
        parts = store.list_parts(info.path, info.upload_id)
    except NoSuchUploadError:
        return None
    return UploadInfo(
        info.path, info.upload_id, info.initiated, info.age_seconds, len(parts), sum(p.size for p in parts)
    )


def _possible_destinations(scope: StorePath, uploads: list[UploadInfo]) -> set[StorePath]:
    """Where the job of an upload can have written from: the scope, one of its parents, or a
    directory between the scope and an upload. Only read there, so looking above the scope is safe."""
    destinations = {scope}
    parent = scope
    while parent.key.strip("/") and parent.parent != parent:
        parent = parent.parent
        destinations.add(parent)
    for upload in uploads:
        directory = upload.path.parent
        while directory.is_under(scope) and directory not in destinations:
            destinations.add(directory)
            if directory == scope or directory.parent == directory:
                break
            directory = directory.parent
    return destinations


def _recorded_upload_ids(
    store: Store,
    scope: StorePath,
    job_id: str,
    uploads: list[UploadInfo],
    threads: int,
    destinations: set[StorePath] | None = None,
) -> set[str]:
    """Upload IDs in the job's own records (`<jobdir>/00/uploads/`, or Hadoop's magic committer's
    pending files under `__magic_job-<id>/`) wherever its job dir can be."""
    if destinations is None:
        destinations = _possible_destinations(scope, uploads)
    record_dirs = [
        JobLayout(destination, job_id, magic).upload_records_dir()
        for destination in sorted(destinations)
        for magic in (False, True)
    ]
    magic_dirs = [JobLayout(destination, job_id, magic=True).job_dir for destination in sorted(destinations)]
    found: set[str] = set()
    for ids in parallel_map(record_dirs, lambda d: _read_records(store, d), threads):
        found |= ids
    for pending in parallel_map(magic_dirs, lambda d: hadoop_pending_uploads(store, d), threads):
        found |= {upload_id for _path, upload_id in pending}
    return found


def _of_committing_jobs(
    store: Store, scope: StorePath, uploads: list[UploadInfo], threads: int
) -> set[tuple[str, str]]:
    """Identities of the uploads that belong to a job past its commit point (never aborted)."""
    committing = committing_jobs(store, _possible_destinations(scope, uploads), threads)
    kept: set[tuple[str, str]] = set()
    for destination, job_id in sorted(committing):
        recorded = _recorded_upload_ids(store, scope, job_id, uploads, threads, {destination})
        kept |= {u.identity for u in uploads if job_id in u.path.key or u.upload_id in recorded}
    return kept


def _read_records(store: Store, records_dir: StorePath) -> set[str]:
    ids: set[str] = set()
    for status in store.list_files(records_dir):
        try:
            records = parse_upload_records(read_json_bytes(store, status.path), str(status.path))
        except (StoreError, InvalidCommitDataError):
            continue  # a record being written or removed right now; the key check still applies
        ids.update(upload_id for _path, upload_id in records)
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
    """Abort every upload in `listing` (see `abort_and_verify`); with `dry_run`, only report them."""
    return AbortReport.run_all(
        listing,
        listing.uploads,
        lambda uploads, bar: abort_and_verify(
            store,
            listing.scope,
            uploads,
            threads=threads,
            attempts=attempts,
            retry_delay=retry_delay,
            verify_rounds=verify_rounds,
            progress=bar,
        ),
        lambda upload: AbortOutcome(upload, WOULD_ABORT),
        dry_run=dry_run,
        description="Aborting uploads",
        progress=progress,
    )


def abort_and_verify(
    store: Store,
    directory: StorePath,
    uploads: Sequence[UploadInfo],
    *,
    threads: int = 16,
    attempts: int = 3,
    retry_delay: float = 0.5,
    verify_rounds: int = 3,
    progress: Progress | None = None,
) -> list[AbortOutcome]:
    """Abort each upload (all under `directory`) once, then list `directory` again and abort
    those still pending, up to `verify_rounds` times; outcomes in the order of `uploads`.

    Aborts run on `threads` threads and retry transient errors `attempts` times. An upload still
    listed after the last round, or whose abort could not be checked, is FAILED.
    """
    progress = progress or NoProgress()
    outcomes: dict[tuple[str, str], AbortOutcome] = {}
    _abort_each(store, uploads, outcomes, threads, attempts, retry_delay, progress)
    checking = _aborted(uploads, outcomes)
    for aborts in range(1, verify_rounds + 2):  # each upload in `checking` was aborted `aborts` times
        if not checking:
            break
        try:
            still = _still_listed(store, directory, checking, attempts, retry_delay, progress)
        except StoreError as error:
            _fail(checking, outcomes, f"abort not verified: {one_line(error)}")
            break
        if aborts > verify_rounds:
            _fail(still, outcomes, f"still pending after {aborts} aborts")
            break
        progress.start("Repeating aborts", len(still))
        _abort_each(store, still, outcomes, threads, attempts, retry_delay, progress)
        checking = _aborted(still, outcomes)
    return [outcomes[upload.identity] for upload in uploads]


def _abort_each(
    store: Store,
    uploads: Sequence[UploadInfo],
    outcomes: dict[tuple[str, str], AbortOutcome],
    threads: int,
    attempts: int,
    retry_delay: float,
    progress: Progress,
) -> None:
    """One abort of each upload in parallel, recorded in `outcomes` (a repeat if already there)."""
    if store.pipelines_requests:
        results = _abort_pipelined(store, uploads, threads, attempts, retry_delay, progress)
    else:
        results = parallel_map(
            uploads, lambda u: _abort_once(store, u, attempts, retry_delay), threads, progress
        )
    for upload, (status, used, error) in zip(uploads, results, strict=True):
        earlier = outcomes.get(upload.identity)
        if earlier is None:
            outcomes[upload.identity] = AbortOutcome(upload, status, used, 0, error)
        else:  # gone after our earlier abort: that abort (or someone's) took effect
            status = ABORTED if status == VANISHED else status
            outcomes[upload.identity] = AbortOutcome(
                upload, status, earlier.attempts + used, earlier.repeats + 1, error
            )


def _abort_pipelined(
    store: Store,
    uploads: Sequence[UploadInfo],
    threads: int,
    attempts: int,
    retry_delay: float,
    progress: Progress,
) -> list[tuple[str, int, str | None]]:
    """`_abort_once` of each upload, the first attempts `threads` at a time in flight from one thread;
    an upload whose first abort fails is retried there as `_abort_once` would."""
    results: list[tuple[str, int, str | None]] = [(FAILED, 0, None)] * len(uploads)

    def start(index: int) -> Future[None]:
        return store.start_abort_multipart_upload(uploads[index].path, uploads[index].upload_id)

    def finish(index: int, request: Future[None]) -> None:
        try:
            request.result()
            results[index] = (ABORTED, 1, None)
        except NoSuchUploadError:
            results[index] = (VANISHED, 1, None)
        except StoreError as error:
            if attempts > 1:
                status, used, last_error = _abort_once(store, uploads[index], attempts - 1, retry_delay)
                results[index] = (status, used + 1, last_error)
            else:
                results[index] = (FAILED, 1, one_line(error))
        progress.advance()

    run_pipelined(range(len(uploads)), start, finish, threads)
    return results


def _abort_once(
    store: Store, upload: UploadInfo, attempts: int, retry_delay: float
) -> tuple[str, int, str | None]:
    """(status, requests sent, error) of one abort, transient errors retried."""
    try:
        _, used = with_retries(
            lambda: store.abort_multipart_upload(upload.path, upload.upload_id), attempts, retry_delay
        )
    except NoSuchUploadError:
        return VANISHED, 1, None
    except StoreError as error:
        return FAILED, attempts, one_line(error)
    return ABORTED, used, None


def _aborted(
    uploads: Sequence[UploadInfo], outcomes: dict[tuple[str, str], AbortOutcome]
) -> list[UploadInfo]:
    return [upload for upload in uploads if outcomes[upload.identity].status == ABORTED]


def _still_listed(
    store: Store,
    directory: StorePath,
    uploads: Sequence[UploadInfo],
    attempts: int,
    retry_delay: float,
    progress: Progress,
) -> list[UploadInfo]:
    """Those of `uploads` that a new listing of `directory` still shows pending."""
    progress.start("Checking aborts", None)
    listed, _ = with_retries(
        lambda: {(u.path.key, u.upload_id) for u in store.list_multipart_uploads(directory)},
        attempts,
        retry_delay,
    )
    return [upload for upload in uploads if upload.identity in listed]


def _fail(
    uploads: Sequence[UploadInfo],
    outcomes: dict[tuple[str, str], AbortOutcome],
    error: str,
) -> None:
    for upload in uploads:
        outcome = outcomes[upload.identity]
        outcomes[upload.identity] = AbortOutcome(upload, FAILED, outcome.attempts, outcome.repeats, error)


def abort_pending_uploads(
    store: Store,
    scope: str | StorePath,
    *,
    dry_run: bool = False,
    sizes: bool | None = None,
    threads: int = 16,
    progress: Progress | None = None,
    **options: Any,
) -> AbortReport:
    """List then abort (or, with `dry_run`, report) the stale uploads under `scope`.

    `sizes` measures each upload's parts and bytes first: one more request per upload, which
    doubles the cost of an abort. None (the default) measures them only in a dry run.
    `options` are those of `list_pending_uploads` (older_than, job_id, now, ...) and the retry
    settings of `abort_uploads` (attempts, retry_delay, verify_rounds).
    """
    retries = {name: options.pop(name) for name in _RETRY_SETTINGS if name in options}
    measure = dry_run if sizes is None else sizes
    listing = list_pending_uploads(store, scope, sizes=measure, threads=threads, progress=progress, **options)
    return abort_uploads(store, listing, dry_run=dry_run, threads=threads, progress=progress, **retries)
