"""Pruning old per-job records from `<destination>/_airflow_commit/`, by age.

Every job that reaches a decision leaves small files there (JobLayout owns the names): its
outcome (the commit point), its record (the `_SUCCESS` it had) and, once its Airflow try
succeeded, a delivery marker. Sensors of parallel backfills and Airflow retries read them, so
they must outlive any sensor wait and any retry; after that they only accumulate. This prunes
them, one job at a time and all of a job's files together, under these rules:

- a job is pruned only when its *newest* record file is older than `older_than`: a younger
  record is never pruned;
- a job whose outcome says *commit* but which has no record yet (COMMITTING) is never pruned:
  its outcome is the decision that rolling the commit forward needs. Nor is a job whose
  outcome cannot be read: it is reported instead;
- just before deleting, the records directory is listed again, and a job whose files changed
  since the first listing is left alone;
- a job's outcome is deleted first, so an interrupted prune never leaves a job that looks
  COMMITTING (a record without an outcome is simply forgotten, as a pruned job is);
- only `<scope>/_airflow_commit/` is listed, with directory boundaries (`out/dataset1` never
  covers `out/dataset10`), and only files named as records there are ever deleted.

An *abort* outcome is what fences an orphaned driver; once it is pruned, the job ID is unknown
again. So `older_than` must exceed the longest a job can live (30 days by default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from airflow_commit_provider.core.cleanup.common import NoProgress, Progress, format_size, iso, one_line
from airflow_commit_provider.core.cleanup.durations import DEFAULT_RECORDS_OLDER_THAN
from airflow_commit_provider.core.cleanup.reports import FAILED, CleanupReport, ScopedListing
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.job_records import group_job_records
from airflow_commit_provider.core.layout import RECORDS_DIR, parse_record_name
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus, Store, StoreError

__all__ = [
    "JobRecords",
    "RecordListing",
    "RecordOutcome",
    "RecordPruneReport",
    "find_job_records",
    "prune_old_records",
    "prune_records",
]

PRUNED, WOULD_PRUNE, CHANGED = "pruned", "would-prune", "changed"
#: Why a job's records are kept (`JobRecords.keep`); None means they are prunable.
RECENT, COMMITTING, UNREADABLE = "recent", "committing", "unreadable"


@dataclass(frozen=True)
class JobRecords:
    """The record files of one job in a records directory, and whether they may go."""

    job_id: str
    files: tuple[FileStatus, ...]
    kinds: tuple[str, ...]
    """Record kinds present: outcome, success, delivered."""
    newest: float
    """Newest modification of any of the job's record files, epoch seconds."""
    age_seconds: float
    state: str | None = None
    """The job's state when its outcome had to be read (an outcome and no record), else None."""
    keep: str | None = None
    """Why the records stay (recent, committing, unreadable), or None if they are to be pruned."""
    error: str | None = None
    """Why the outcome could not be read (with `keep == "unreadable"`)."""

    @property
    def stale(self) -> bool:
        return self.keep is None

    @property
    def bytes(self) -> int:
        return sum(status.size for status in self.files)

    @property
    def fingerprint(self) -> frozenset[tuple[str, int, float]]:
        return _fingerprint(self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "kinds": list(self.kinds),
            "files": len(self.files),
            "bytes": self.bytes,
            "newest": iso(self.newest),
            "age_seconds": round(self.age_seconds, 3),
            "state": self.state,
            "keep": self.keep,
            "error": self.error,
        }


@dataclass
class RecordListing(ScopedListing):
    records_dir: StorePath | None = None
    jobs: list[JobRecords] = field(default_factory=list)
    unrecognised: int = 0
    """Files in the records directory not named as a job's record: never touched."""

    @property
    def stale(self) -> list[JobRecords]:
        return [job for job in self.jobs if job.stale]

    def kept(self, reason: str) -> list[JobRecords]:
        return [job for job in self.jobs if job.keep == reason]

    def to_json(self, sample: int | None = None) -> dict[str, Any]:
        shown = self.jobs if sample is None else self.jobs[:sample]
        return {
            **self.selection_json(),
            "records_dir": str(self.records_dir),
            "jobs_found": len(self.jobs),
            "stale": len(self.stale),
            "kept_recent": len(self.kept(RECENT)),
            "kept_committing": len(self.kept(COMMITTING)),
            "kept_unreadable": len(self.kept(UNREADABLE)),
            "stale_files": sum(len(job.files) for job in self.stale),
            "stale_bytes": sum(job.bytes for job in self.stale),
            "unrecognised": self.unrecognised,
            "other_jobs": self.other_jobs,
            "jobs": [job.to_json() for job in shown],
        }


@dataclass(frozen=True)
class RecordOutcome:
    job: JobRecords
    status: str
    """One of pruned, would-prune, changed (written to since listed: kept), failed."""
    error: str | None = None

    @property
    def label(self) -> str:
        return self.job.job_id

    @property
    def measures(self) -> Mapping[str, int]:
        if self.status not in RecordPruneReport.ACTED:
            return {}
        return {"files": len(self.job.files), "bytes": self.job.bytes}

    def failure_json(self) -> dict[str, Any]:
        return {"job_id": self.job.job_id, "error": self.error}

    def to_json(self) -> dict[str, Any]:
        return {**self.job.to_json(), "status": self.status, "error": self.error}


class RecordPruneReport(CleanupReport[RecordListing, RecordOutcome]):
    ACTED = (PRUNED, WOULD_PRUNE)
    DETAILS = "jobs"
    ACTION = ("prune", "pruned")
    ITEMS = "the records of {} jobs"

    def _counts(self) -> dict[str, Any]:
        listing = self.listing
        return {
            "jobs_found": len(listing.jobs),
            "stale": len(listing.stale),
            "pruned": self.count(PRUNED),
            "would_prune": self.count(WOULD_PRUNE),
            "kept_recent": len(listing.kept(RECENT)),
            "kept_committing": len(listing.kept(COMMITTING)),
            "kept_unreadable": len(listing.kept(UNREADABLE)),
            "changed": self.count(CHANGED),
            "failed": self.count(FAILED),
            "files": self.totals["files"],
            "bytes": self.totals["bytes"],
            "unrecognised": listing.unrecognised,
        }

    def _where(self) -> str:
        return f"in {self.listing.records_dir}"

    def _details(self, counts: dict[str, Any]) -> str:
        return (
            f"{counts['files']} files, {format_size(counts['bytes'])}; kept {counts['kept_recent']} recent, "
            f"{counts['kept_committing']} committing, {counts['kept_unreadable']} unreadable, "
            f"{counts['changed']} written to meanwhile"
        )


def find_job_records(
    store: Store,
    scope: str | StorePath,
    *,
    older_than: timedelta | str | float = DEFAULT_RECORDS_OLDER_THAN,
    job_id: str | None = None,
    now: datetime | None = None,
    allow_bucket_root: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
) -> RecordListing:
    """The jobs with records in `<scope>/_airflow_commit/`, each prunable or kept (and why).

    One listing of the records directory; then, for each old job with an outcome but no record,
    one read of the outcome (through `job_control.inspect_job`) to tell COMMITTING from ABORTED.
    """
    listing = RecordListing.select(
        scope, older_than=older_than, job_id=job_id, now=now, allow_bucket_root=allow_bucket_root
    )
    records_dir = listing.scope.join(RECORDS_DIR)
    listing.records_dir = records_dir
    progress = progress or NoProgress()
    progress.start("Listing job records", None)
    grouped, listing.unrecognised = group_job_records(store, records_dir, progress.advance)
    if job_id is not None:
        listing.other_jobs = len([name for name in grouped if name != job_id])
        grouped = {name: files for name, files in grouped.items() if name == job_id}
    clock, limit = listing.now.timestamp(), listing.older_than.total_seconds()
    jobs = [_job(name, files, clock, limit) for name, files in sorted(grouped.items())]
    undecided = [
        job for job in jobs if job.keep is None and "outcome" in job.kinds and "success" not in job.kinds
    ]
    settled = dict(
        zip(
            [job.job_id for job in undecided],
            parallel_map(undecided, lambda job: _settle(store, listing.scope, job), threads),
            strict=True,
        )
    )
    listing.jobs = [settled.get(job.job_id, job) for job in jobs]
    return listing


def _job(job_id: str, files: list[tuple[str, FileStatus]], clock: float, limit: float) -> JobRecords:
    newest = max(status.modified for _, status in files)
    age = clock - newest
    return JobRecords(
        job_id=job_id,
        files=tuple(sorted((status for _, status in files), key=_outcome_first)),
        kinds=tuple(sorted({kind for kind, _ in files})),
        newest=newest,
        age_seconds=age,
        keep=None if age >= limit else RECENT,
    )


def _is_outcome(status: FileStatus) -> bool:
    parsed = parse_record_name(status.path.name)
    return parsed is not None and parsed[1] == "outcome"


def _outcome_first(status: FileStatus) -> tuple[bool, str]:
    return (not _is_outcome(status), status.path.key)


def _settle(store: Store, destination: StorePath, job: JobRecords) -> JobRecords:
    """An old job with an outcome and no record: prunable if aborted, kept if its commit is pending."""
    try:
        state = inspect_job(store, destination, job.job_id).state
    except (InvalidCommitDataError, StoreError) as error:
        return replace(job, keep=UNREADABLE, error=one_line(error))
    if state == JobState.ABORTED:
        return replace(job, state=state.value)
    if state == JobState.COMMITTING:
        return replace(job, state=state.value, keep=COMMITTING)
    # COMMITTED: its record appeared since the listing, so it is young; anything else: the outcome
    # vanished meanwhile (another prune). Either way, not this run's to delete.
    return replace(job, state=state.value, keep=RECENT)


def _fingerprint(files: tuple[FileStatus, ...] | list[FileStatus]) -> frozenset[tuple[str, int, float]]:
    return frozenset((status.path.key, status.size, status.modified) for status in files)


def prune_records(
    store: Store,
    listing: RecordListing,
    *,
    dry_run: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    keep_outcomes: bool = False,
) -> RecordPruneReport:
    """Delete the records of the listing's stale jobs; with `dry_run` only report them.

    The records directory is listed once more; jobs whose files changed are left alone. Then all
    the outcomes go in one batch, and the other files in a second (a few requests in all on S3).
    `keep_outcomes` keeps every job's outcome for `report.outcomes` (the CLI's `--json`).
    """
    del threads  # deletes are batched by the store; kept for the same signature as the others

    def prune_all(jobs: Iterable[JobRecords], record: Callable[[Any], None], bar: Progress) -> None:
        for outcome in _prune(store, listing, list(jobs), bar):
            record(outcome)

    stale = listing.stale
    return RecordPruneReport.run_all(
        listing,
        stale,
        prune_all,
        lambda job: RecordOutcome(job, WOULD_PRUNE),
        dry_run=dry_run,
        description="Pruning job records",
        total=len(stale),
        progress=progress,
        keep_outcomes=keep_outcomes,
    )


def _prune(
    store: Store, listing: RecordListing, jobs: list[JobRecords], bar: Progress
) -> list[RecordOutcome]:
    if not jobs:
        return []
    records_dir = listing.records_dir or listing.scope.join(RECORDS_DIR)
    try:
        now, _ = group_job_records(store, records_dir)
    except StoreError as error:
        return [RecordOutcome(job, FAILED, one_line(error)) for job in jobs]
    unchanged = []
    outcomes: dict[str, RecordOutcome] = {}
    for job in jobs:
        current = [status for _, status in now.get(job.job_id, [])]
        if _fingerprint(current) != job.fingerprint:
            outcomes[job.job_id] = RecordOutcome(job, CHANGED)
        else:
            unchanged.append(job)
    for job in unchanged:
        if not all(status.path.is_under(records_dir) for status in job.files):
            raise AssertionError(f"refusing to delete records of {job.job_id} outside {records_dir}")
    first = [status.path for job in unchanged for status in job.files if _is_outcome(status)]
    rest = [status.path for job in unchanged for status in job.files if not _is_outcome(status)]
    try:
        store.delete_files(first)  # outcomes first: never leave a job that looks COMMITTING
        store.delete_files(rest)
    except StoreError as error:
        for job in unchanged:
            outcomes[job.job_id] = RecordOutcome(job, FAILED, one_line(error))
    else:
        for job in unchanged:
            outcomes[job.job_id] = RecordOutcome(job, PRUNED)
    bar.advance(len(jobs))
    return [outcomes[job.job_id] for job in jobs]


def prune_old_records(
    store: Store,
    scope: str | StorePath,
    *,
    dry_run: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    keep_outcomes: bool = False,
    **find_options: Any,
) -> RecordPruneReport:
    """Find then prune (or, with `dry_run`, report) the records of old jobs under `scope`.

    `find_options` are those of `find_job_records` (older_than, job_id, now, allow_bucket_root).
    """
    listing = find_job_records(store, scope, threads=threads, progress=progress, **find_options)
    return prune_records(
        store, listing, dry_run=dry_run, threads=threads, progress=progress, keep_outcomes=keep_outcomes
    )
