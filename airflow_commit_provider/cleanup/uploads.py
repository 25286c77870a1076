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
`committing`; finishing the job (a retry, `job_control.finish_or_fence`) lets them go. Nor are
the uploads of a live job (set up, undecided, younger than its longest duration: `live_jobs`),
however old: a job may run longer than the age threshold. They are counted in `live`. A cleanup
scoped to one job ID is a person's statement that the job is over (a killed driver that was never
aborted), so there the job's liveness is not asked.

At any count, memory stays flat: the listing streams page by page into a local spool (which the
CLI shows from before asking), the uploads are aborted `ABORT_BATCH` at a time from it, and
what must be looked up later (the uploads aborted, the upload IDs a job recorded) is a set on
local disk (`spool.KeySet`). An interrupted run leaves nothing half done in the store: each
abort is one request, an aborted upload no longer lists, and running again finishes the rest.
The time is the aborts': one request each, `threads` in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import islice
from typing import Any, ClassVar

from airflow_commit_provider.cleanup.committing import committing_jobs, live_jobs
from airflow_commit_provider.cleanup.common import Breaker, iso, one_line, with_retries
from airflow_commit_provider.cleanup.reports import FAILED, NOT_TRIED, CleanupReport, ScopedListing
from airflow_commit_provider.cleanup.spool import KeySet, Spool, batches
from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.parallel import parallel_map, run_parallel, run_pipelined
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError
from airflow_commit_provider.core.stages.uploads import hadoop_pending_uploads, parse_upload_records
from airflow_commit_provider.core.store.base import NoSuchUploadError, PendingUpload, Store, StoreError
from airflow_commit_provider.durations import DEFAULT_MAX_JOB_DURATION, DEFAULT_OLDER_THAN, as_timedelta
from airflow_commit_provider.progress import NoProgress, Progress, format_size

ABORTED, VANISHED, WOULD_ABORT = "aborted", "vanished", "would-abort"
#: Options of `abort_uploads` that `abort_pending_uploads` passes on to it.
_ABORT_SETTINGS = ("attempts", "retry_delay", "verify_rounds", "keep_outcomes")
#: Uploads taken from the spool at a time: a listing page's worth, as S3 pages them.
ABORT_BATCH = 1000
#: Directories whose records one step reads at once.
_DIRECTORY_BATCH = 256


def upload_identity(key: str, upload_id: str) -> str:
    """What identifies an upload in a later listing: its ID first (IDs hold no space), then its key."""
    return f"{upload_id} {key}"


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
    def identity(self) -> str:
        return upload_identity(self.path.key, self.upload_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "key": self.path.key,
            "upload_id": self.upload_id,
            "initiated": iso(self.initiated),
            "age_seconds": round(self.age_seconds, 3),
            "parts": self.parts,
            "bytes": self.bytes,
        }


@dataclass
class UploadListing(ScopedListing):
    """The uploads a cleanup would act on (spooled on local disk), and how many others it saw and
    left alone. A `CleanupListing` of `UploadInfo`: every upload listed is one to abort."""

    DETAILS: ClassVar[str] = "uploads"

    uploads: Spool[UploadInfo] = field(default_factory=Spool)
    too_recent: int = 0
    committing: int = 0
    """Old uploads kept because their job is past its commit point and must be rolled forward."""
    live: int = 0
    """Old uploads kept because their job is still live (`committing.live_jobs`)."""
    vanished: int = 0
    """Uploads that disappeared between listing and ListParts."""
    sizes_measured: bool = False
    """Whether each upload's parts and bytes were measured (one ListParts per upload)."""
    bytes: int = 0
    parts: int = 0

    @property
    def count(self) -> int:
        return len(self.uploads)

    @property
    def total_bytes(self) -> int | None:
        """Bytes in the uploads' parts; None when sizes were not measured."""
        return self.bytes if self.sizes_measured else None

    @property
    def total_parts(self) -> int | None:
        return self.parts if self.sizes_measured else None

    def add(self, upload: UploadInfo) -> None:
        self.uploads.append(upload)
        self.bytes += upload.bytes or 0
        self.parts += upload.parts or 0

    def items(self) -> Iterable[UploadInfo]:
        return self.uploads

    def targets(self) -> Iterable[UploadInfo]:
        return self.uploads

    @property
    def target_count(self) -> int:
        return self.count

    def summary_json(self) -> dict[str, Any]:
        return {
            **self.selection_json(),
            "count": self.count,
            "sizes_measured": self.sizes_measured,
            "bytes": self.total_bytes,
            "parts": self.total_parts,
            "too_recent": self.too_recent,
            "committing": self.committing,
            "live": self.live,
            "other_jobs": self.other_jobs,
            "vanished": self.vanished,
        }

    def describe(self) -> str:
        return (
            f"{self.count} pending uploads older than {self.age} under {self.scope}: "
            f"{format_size(self.total_bytes)} in {self.total_parts} parts "
            f"({self.too_recent} more recent, {self.other_jobs} of other jobs, "
            f"{self.committing} of jobs past their commit point, {self.live} of live jobs)"
        )

    def close(self) -> None:
        self.uploads.close()


@dataclass(frozen=True)
class AbortOutcome:
    upload: UploadInfo
    status: str
    """One of aborted, vanished, failed, would-abort, not-tried."""
    attempts: int = 0
    """AbortMultipartUpload requests sent for it, retries and repeats included."""
    repeats: int = 0
    """Extra aborts because the upload was still listed after the previous one."""
    error: str | None = None

    @property
    def label(self) -> str:
        return self.upload.path.key

    @property
    def measures(self) -> Mapping[str, int]:
        acted = self.status in AbortReport.ACTED
        return {
            "repeats": self.repeats,
            "bytes": (self.upload.bytes or 0) if acted else 0,
            "parts": (self.upload.parts or 0) if acted else 0,
        }

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
        return self.totals["bytes"] if self.listing.sizes_measured else None

    def _counts(self) -> dict[str, Any]:
        return {
            "listed": self.listing.count,
            "aborted": self.aborted,
            "would_abort": self.count(WOULD_ABORT),
            "vanished": self.vanished,
            "failed": self.count(FAILED),
            "repeated_aborts": self.totals["repeats"],
            "sizes_measured": self.listing.sizes_measured,
            "bytes": self.bytes_reclaimed,
            "parts": self.totals["parts"] if self.listing.sizes_measured else None,
            "too_recent": self.listing.too_recent,
            "committing": self.listing.committing,
            "live": self.listing.live,
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
            f"commit point, {counts['live']} kept for live jobs"
        )


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
    max_job_duration: timedelta | str | float = DEFAULT_MAX_JOB_DURATION,
) -> UploadListing:
    """Pending uploads under the `scope` directory initiated at least `older_than` before `now`,
    but none of a job past its commit point or, unless `job_id` names the job, still live
    (`max_job_duration`: how long a job that recorded no duration of its own counts as live after
    its setup; see `committing.live_jobs`).

    With `job_id`, only uploads whose key contains it or that the job recorded under its job
    directory: our records, or the ``.pending``/``.pendingset`` files of Hadoop's S3A magic
    committer (whose upload keys carry no job ID). With `sizes`, each upload's parts and bytes
    come from ListParts (in parallel). The uploads are spooled on local disk, in listing order.
    """
    listing = UploadListing.select(
        scope, older_than=older_than, job_id=job_id, now=now, allow_bucket_root=allow_bucket_root
    )
    if job_id is not None:
        validate_job_id(job_id)
    longest = as_timedelta(max_job_duration, "max_job_duration")
    progress = progress or NoProgress()
    directories = KeySet()  # where, below the scope, the job of a candidate can have written from
    candidates: Spool[UploadInfo] = Spool()
    try:
        _list_old_uploads(store, listing, candidates, directories, progress)
        destinations = _possible_destinations(listing.scope, directories)
        if job_id is not None:
            recorded = _recorded_upload_ids(store, job_id, destinations(), threads)
            candidates, listing.other_jobs = _kept(
                candidates, lambda u: job_id in u.path.key or u.upload_id in recorded
            )
            recorded.close()
        if candidates:
            candidates, listing.committing = _without_jobs(
                store, candidates, committing_jobs(store, destinations(), threads), threads
            )
        if candidates and job_id is None:  # a job named by its ID is one a person says is over
            live = live_jobs(store, destinations(), listing.now, longest, threads)
            candidates, listing.live = _without_jobs(store, candidates, live, threads)
    finally:
        directories.close()
    if not sizes:
        listing.uploads.close()
        listing.uploads = candidates
        return listing
    listing.sizes_measured = True
    progress.start("Measuring uploads", len(candidates))
    for batch in batches(candidates, ABORT_BATCH):
        for measured in parallel_map(batch, lambda u: _measure(store, u), threads, progress):
            if measured is None:
                listing.vanished += 1
            else:
                listing.add(measured)
    candidates.close()
    return listing


def _list_old_uploads(
    store: Store,
    listing: UploadListing,
    candidates: Spool[UploadInfo],
    directories: KeySet,
    progress: Progress,
) -> None:
    """Stream the scope's pending uploads: the old ones into `candidates`, their directories (relative
    to the scope) into `directories`, the rest counted as too recent."""
    scope, clock = listing.scope, listing.now.timestamp()
    limit = listing.older_than.total_seconds()
    progress.start("Listing uploads", None)
    for page in batches(store.list_multipart_uploads(scope), ABORT_BATCH):
        progress.advance(len(page))
        seen: set[str] = set()
        for pending in page:
            if not pending.path.is_under(scope):  # never trust the store's prefix match alone
                continue
            age = clock - pending.initiated
            if age < limit:
                listing.too_recent += 1
                continue
            candidates.append(UploadInfo(pending.path, pending.upload_id, pending.initiated, age))
            parent = pending.path.relative_to(scope).rpartition("/")[0]
            if parent and parent not in seen:  # a page's uploads share few directories
                parts = parent.split("/")
                seen.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        directories.update(seen)


def _possible_destinations(scope: StorePath, directories: KeySet) -> Callable[[], Iterator[StorePath]]:
    """Where the job of an upload can have written from: the scope, one of its parents, or a
    directory between the scope and an upload. Only read there, so looking above the scope is safe."""

    def destinations() -> Iterator[StorePath]:
        yield scope
        parent = scope
        while parent.key.strip("/") and parent.parent != parent:
            parent = parent.parent
            yield parent
        for relative in directories:
            yield scope.join(relative)

    return destinations


def _kept(uploads: Spool[UploadInfo], keep: Callable[[UploadInfo], bool]) -> tuple[Spool[UploadInfo], int]:
    """The uploads `keep` accepts, in a new spool (the old one is closed), and how many it refused."""
    kept: Spool[UploadInfo] = Spool()
    refused = 0
    for upload in uploads:
        if keep(upload):
            kept.append(upload)
        else:
            refused += 1
    uploads.close()
    return kept, refused


def _without_jobs(
    store: Store, uploads: Spool[UploadInfo], kept: set[tuple[StorePath, str]], threads: int
) -> tuple[Spool[UploadInfo], int]:
    """The uploads minus those of the `kept` jobs (destination, job ID), never aborted, and how many
    those are: an upload is a job's when its key holds the job ID or the job recorded its ID."""
    if not kept:
        return uploads, 0
    recorded = KeySet()
    for destination, job_id in sorted(kept):
        found = _recorded_upload_ids(store, job_id, [destination], threads)
        recorded.update(found)
        found.close()
    jobs = sorted({job_id for _destination, job_id in kept})
    try:
        return _kept(
            uploads,
            lambda u: not any(job in u.path.key for job in jobs) and u.upload_id not in recorded,
        )
    finally:
        recorded.close()


def _measure(store: Store, info: UploadInfo) -> UploadInfo | None:
    try:
        parts = store.list_parts(info.path, info.upload_id)
    except NoSuchUploadError:
        return None
    return UploadInfo(
        info.path, info.upload_id, info.initiated, info.age_seconds, len(parts), sum(p.size for p in parts)
    )


def _recorded_upload_ids(
    store: Store, job_id: str, destinations: Iterable[StorePath], threads: int
) -> KeySet:
    """Upload IDs in the job's own records (`<jobdir>/00/uploads/`, or Hadoop's magic committer's
    pending files under `__magic_job-<id>/`) wherever its job dir can be, on local disk."""

    def in_job_dirs(destination: StorePath) -> tuple[list[StorePath], set[str]]:
        """The job's record files under `destination`, and the IDs in Hadoop's pending files there."""
        files = [
            status.path
            for magic in (False, True)
            for status in store.list_files(JobLayout(destination, job_id, magic).upload_records_dir())
        ]
        hadoop = hadoop_pending_uploads(store, JobLayout(destination, job_id, magic=True).job_dir)
        return files, {upload_id for _path, upload_id in hadoop}

    found = KeySet()
    for places in batches(destinations, _DIRECTORY_BATCH):
        for files, hadoop_ids in parallel_map(places, in_job_dirs, threads):
            found.update(hadoop_ids)
            for chunk in batches(files, _DIRECTORY_BATCH):
                for ids in parallel_map(chunk, lambda path: _read_record(store, path), threads):
                    found.update(ids)
    return found


def _read_record(store: Store, path: StorePath) -> list[str]:
    try:
        records = parse_upload_records(read_json_bytes(store, path), str(path))
    except (StoreError, InvalidCommitDataError):
        return []  # a record being written or removed right now; the key check still applies
    return [upload_id for _path, upload_id in records]


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
    keep_outcomes: bool = False,
) -> AbortReport:
    """Abort every upload in `listing` (see `abort_and_verify`); with `dry_run`, only report them.

    `keep_outcomes` spools every upload's outcome for `report.outcomes` (the CLI's machine formats, `-o json|yaml|plain`).
    """

    def act_all(uploads: Iterable[UploadInfo], record: Callable[[Any], None], bar: Progress) -> None:
        for outcome in abort_and_verify(
            store,
            listing.scope,
            uploads,
            threads=threads,
            attempts=attempts,
            retry_delay=retry_delay,
            verify_rounds=verify_rounds,
            progress=bar,
        ):
            record(outcome)

    return AbortReport.run_all(
        listing,
        listing.uploads,
        act_all,
        lambda upload: AbortOutcome(upload, WOULD_ABORT),
        dry_run=dry_run,
        description="Aborting uploads",
        total=listing.count,
        progress=progress,
        keep_outcomes=keep_outcomes,
    )


def abort_and_verify(
    store: Store,
    scope: StorePath,
    uploads: Iterable[UploadInfo],
    *,
    threads: int = 16,
    attempts: int = 3,
    retry_delay: float = 0.5,
    verify_rounds: int = 3,
    progress: Progress | None = None,
) -> Iterator[AbortOutcome]:
    """Abort each upload (all under `scope`) once, then list `scope` again and abort
    those still pending, up to `verify_rounds` times; yields each upload's final outcome.

    Aborts run `threads` at a time and retry transient errors `attempts` times. An upload still
    listed after the last round, or whose abort could not be checked, is FAILED. After
    `STOP_AFTER_FAILURES` failures in a row no more uploads are tried: the rest are NOT_TRIED.
    """
    progress = progress or NoProgress()
    breaker = Breaker()
    source = iter(uploads)
    round_ = _Round()
    try:
        for outcome in _abort_each(
            store, ((u, None) for u in source), threads, attempts, retry_delay, progress, breaker
        ):
            yield from round_.take(outcome)
        round_.seal()
        yield from (AbortOutcome(upload, NOT_TRIED) for upload in source)
        for aborts in range(1, verify_rounds + 2):  # each upload in the round was aborted `aborts` times
            if not round_.aborted:
                return
            try:
                still = _still_listed(store, scope, round_.keys, attempts, retry_delay, progress)
            except StoreError as error:
                note = f"abort not verified: {one_line(error)}"
                yield from (replace(o, status=FAILED, error=note) for o in round_.aborted)
                return
            repeat: Spool[AbortOutcome] = Spool()
            try:
                if not len(still):  # the usual answer: every abort took effect, nothing to look up
                    yield from round_.aborted
                else:
                    for outcome in round_.aborted:
                        if outcome.upload.identity in still:
                            repeat.append(outcome)
                        else:
                            yield outcome
            finally:
                still.close()
                round_.close()
            round_ = _Round()
            if aborts > verify_rounds:
                note = f"still pending after {aborts} aborts"
                yield from (replace(o, status=FAILED, error=note) for o in repeat)
                repeat.close()
                return
            progress.start("Repeating aborts", len(repeat))
            remaining = iter(repeat)
            again = ((o.upload, o) for o in remaining)
            for outcome in _abort_each(store, again, threads, attempts, retry_delay, progress, breaker):
                yield from round_.take(outcome)
            round_.seal()
            note = f"still pending after {aborts} aborts"
            yield from (replace(o, status=FAILED, error=note) for o in remaining)
            repeat.close()
    finally:
        round_.close()


class _Round:
    """The uploads one round of aborts answered as aborted: they count once a listing no longer
    shows them. Spooled, with their identities in a local set for that listing."""

    def __init__(self) -> None:
        self.aborted: Spool[AbortOutcome] = Spool()
        self.keys = KeySet()
        self._unsaved: list[str] = []

    def take(self, outcome: AbortOutcome) -> Iterator[AbortOutcome]:
        """Hold an aborted upload's outcome for checking; pass any other outcome on, final."""
        if outcome.status != ABORTED:
            yield outcome
            return
        self.aborted.append(outcome)
        self._unsaved.append(outcome.upload.identity)
        if len(self._unsaved) >= ABORT_BATCH:
            self.seal()

    def seal(self) -> None:
        self.keys.update(self._unsaved)
        self._unsaved = []

    def close(self) -> None:
        self.aborted.close()
        self.keys.close()


def _abort_each(
    store: Store,
    items: Iterator[tuple[UploadInfo, AbortOutcome | None]],
    threads: int,
    attempts: int,
    retry_delay: float,
    progress: Progress,
    breaker: Breaker,
) -> Iterator[AbortOutcome]:
    """One abort of each item's upload, `ABORT_BATCH` at a time and `threads` in flight: its outcome
    so far (a repeat when the item carries an earlier one). Stops taking items when `breaker` trips."""
    source = breaker.items(items)
    done: list[AbortOutcome] = []

    def finish(item: tuple[UploadInfo, AbortOutcome | None], result: tuple[str, int, str | None]) -> None:
        breaker.note(result[0] == FAILED)
        done.append(_merged(item, *result))
        progress.advance()

    while True:
        batch = islice(source, ABORT_BATCH)
        if store.pipelines_requests:
            sent = _abort_pipelined(store, batch, finish, threads, attempts, retry_delay)
        else:
            sent = run_parallel(
                batch, lambda item: finish(item, _abort_once(store, item[0], attempts, retry_delay)), threads
            )
        finished, done[:] = list(done), []
        yield from finished
        if not sent:
            return


def _merged(
    item: tuple[UploadInfo, AbortOutcome | None], status: str, used: int, error: str | None
) -> AbortOutcome:
    upload, earlier = item
    if earlier is None:
        return AbortOutcome(upload, status, used, 0, error)
    # gone after our earlier abort: that abort (or someone's) took effect
    status = ABORTED if status == VANISHED else status
    return AbortOutcome(upload, status, earlier.attempts + used, earlier.repeats + 1, error)


def _abort_pipelined(
    store: Store,
    items: Iterable[tuple[UploadInfo, AbortOutcome | None]],
    finish: Callable[[tuple[UploadInfo, AbortOutcome | None], tuple[str, int, str | None]], None],
    threads: int,
    attempts: int,
    retry_delay: float,
) -> int:
    """`_abort_once` of each upload, the first attempts `threads` at a time in flight from one thread;
    an upload whose first abort fails is retried there as `_abort_once` would."""

    def start(item: tuple[UploadInfo, AbortOutcome | None]) -> Future[None]:
        return store.start_abort_multipart_upload(item[0].path, item[0].upload_id)

    def settle(item: tuple[UploadInfo, AbortOutcome | None], request: Future[None]) -> None:
        try:
            request.result()
            result: tuple[str, int, str | None] = (ABORTED, 1, None)
        except NoSuchUploadError:
            result = (VANISHED, 1, None)
        except StoreError as error:
            if attempts > 1:
                status, used, last_error = _abort_once(store, item[0], attempts - 1, retry_delay)
                result = (status, used + 1, last_error)
            else:
                result = (FAILED, 1, one_line(error))
        finish(item, result)

    return run_pipelined(items, start, settle, threads)


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


def _still_listed(
    store: Store,
    scope: StorePath,
    aborted: KeySet,
    attempts: int,
    retry_delay: float,
    progress: Progress,
) -> KeySet:
    """The identities in `aborted` that a new listing of `scope` still shows pending."""

    def listing() -> KeySet:
        progress.start("Checking aborts", None)
        still = KeySet()
        try:
            for page in batches(store.list_multipart_uploads(scope), ABORT_BATCH):
                progress.advance(len(page))
                still.update(key for key in map(_identity, page) if key in aborted)
        except BaseException:
            still.close()
            raise
        return still

    return with_retries(listing, attempts, retry_delay)[0]


def _identity(upload: PendingUpload) -> str:
    return upload_identity(upload.path.key, upload.upload_id)


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
    settings of `abort_uploads` (attempts, retry_delay, verify_rounds) and its `keep_outcomes`.
    """
    settings = {name: options.pop(name) for name in _ABORT_SETTINGS if name in options}
    measure = dry_run if sizes is None else sizes
    listing = list_pending_uploads(store, scope, sizes=measure, threads=threads, progress=progress, **options)
    return abort_uploads(store, listing, dry_run=dry_run, threads=threads, progress=progress, **settings)
