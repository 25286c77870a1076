"""Pruning old per-job records from `<destination>/_airflow_commit/` by a policy: age, and the
newest jobs kept.

Every job that reaches a decision leaves files there (JobLayout owns the names): its outcome (the
commit point), its entry in the records index (`core.records_index`), its record (the `_SUCCESS`
it had), its lists folder `<jobId>/` (the file and partition lists) and, once its Airflow try
succeeded, a delivery marker. Sensors of parallel backfills and Airflow retries read them, so they
must outlive any sensor wait and any retry; after that they only accumulate. This prunes them,
one job at a time and all of a job's files together, under these rules (`RecordPolicy`):

- a job is pruned only when its *newest* file is older than `older_than` (the minimum age): a
  younger record is never pruned; and of the jobs that old, the `keep_newest` newest stay too;
- `older_than` is at least `max_job_duration`, the longest a job runs: an *abort* outcome is
  what fences an orphaned driver (once it is pruned, the job ID is unknown again), so a policy
  that could prune one younger than the longest job is refused;
- a job whose outcome says *commit* but which has no record yet (COMMITTING) is never pruned:
  its outcome is the decision that rolling the commit forward needs. Nor is a job whose
  outcome cannot be read: it is reported instead;
- just before deleting, the records directory is listed again, and a job whose files changed
  since the first listing is left alone;
- a job's outcome is deleted first, so an interrupted prune never leaves a job that looks
  COMMITTING (a record without an outcome is simply forgotten, as a pruned job is); its record
  and index entry go last, so an interrupted prune leaves a job the next one still recognises;
- only `<scope>/_airflow_commit/` is listed, with directory boundaries (`out/dataset1` never
  covers `out/dataset10`), and only a job's own files there are ever deleted: files named as its
  records or index entry, and its lists folder (a folder of no job with records is left alone).

The jobs kept that have an outcome but no index entry (jobs from before the index, or whose
driver died between outcome and entry) get their entry (`index_jobs`), so a prune also keeps the
index whole; `records reindex` does only that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

from airflow_commit_provider.cleanup.common import iso, one_line
from airflow_commit_provider.cleanup.reports import FAILED, CleanupReport, ScopedListing
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.job_records import group_job_records, job_file
from airflow_commit_provider.core.layout import RECORDS_DIR, JobLayout
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.records_index import write_entry
from airflow_commit_provider.core.store.base import FileStatus, Store, StoreError
from airflow_commit_provider.durations import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_RECORDS_OLDER_THAN,
    as_timedelta,
    format_duration,
)
from airflow_commit_provider.progress import NoProgress, Progress, format_size

__all__ = [
    "IndexReport",
    "JobRecords",
    "RecordListing",
    "RecordOutcome",
    "RecordPolicy",
    "RecordPruneReport",
    "find_job_records",
    "index_jobs",
    "prune_old_records",
    "prune_records",
    "record_policy",
    "reindex_records",
]

PRUNED, WOULD_PRUNE, CHANGED = "pruned", "would-prune", "changed"
#: Why a job's records are kept (`JobRecords.keep`); None means they are prunable.
RECENT, NEWEST, COMMITTING, UNREADABLE = "recent", "newest", "committing", "unreadable"
#: The order a job's files are deleted in, by kind: the outcome first (never a job that looks
#: COMMITTING), its record and index entry last (what the next prune recognises the job by).
_DELETE_ORDER = {"outcome": 0, "lists": 1, "delivered": 1, "success": 2, "index": 2}


@dataclass(frozen=True)
class RecordPolicy:
    """Which jobs' records a prune keeps: every job younger than `older_than`, and of the older
    ones the `keep_newest` newest; `older_than` is never shorter than `max_job_duration`."""

    older_than: timedelta
    keep_newest: int = 0
    max_job_duration: timedelta = DEFAULT_MAX_JOB_DURATION

    def to_json(self) -> dict[str, Any]:
        return {
            "older_than_seconds": self.older_than.total_seconds(),
            "keep_newest": self.keep_newest,
            "max_job_duration_seconds": self.max_job_duration.total_seconds(),
        }


def record_policy(
    older_than: timedelta | str | float = DEFAULT_RECORDS_OLDER_THAN,
    keep_newest: int | str | None = 0,
    max_job_duration: timedelta | str | float = DEFAULT_MAX_JOB_DURATION,
    *,
    arguments: str = "",
) -> RecordPolicy:
    """The policy from what users give (durations as `30d`, seconds or timedeltas; a count), or a
    one-line ValueError naming the argument (its name after the prefix `arguments`, such as the
    DAG's `records_`).

    A minimum age shorter than the longest job is refused: a younger abort outcome may still fence
    an orphaned driver, and once pruned the driver could come back and commit.
    """
    age = as_timedelta(older_than, f"{arguments}older_than")
    longest = as_timedelta(max_job_duration, f"{arguments}max_job_duration")
    if age < longest:
        raise ValueError(
            f"{arguments}older_than: {format_duration(age.total_seconds())} is shorter than "
            f"{arguments}max_job_duration {format_duration(longest.total_seconds())}: an abort outcome younger "
            "than the longest job may still fence an orphaned driver; keep records at least that long, or "
            f"give the real longest job as {arguments}max_job_duration"
        )
    return RecordPolicy(age, _count(keep_newest, f"{arguments}keep_newest"), longest)


def _count(value: int | str | None, argument: str) -> int:
    """A number of jobs: an int, or digits (a rendered template); None and empty mean 0."""
    if value is None or value == "":
        return 0
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{argument}: expected a number of jobs (0 or more), got {value!r}")


@dataclass(frozen=True)
class JobRecords:
    """The record files of one job in a records directory, and whether they may go."""

    job_id: str
    files: tuple[FileStatus, ...]
    kinds: tuple[str, ...]
    """Kinds of the job's files present: outcome, success, delivered, index, lists."""
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
    def unindexed(self) -> bool:
        """Decided (it has its outcome) but without its entry in the records index."""
        return "outcome" in self.kinds and "index" not in self.kinds

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
    """The jobs with records in a destination's records directory, each prunable or kept (and why).
    A `CleanupListing` of `JobRecords`: the stale jobs are those to prune."""

    DETAILS: ClassVar[str] = "jobs"

    records_dir: StorePath | None = None
    policy: RecordPolicy | None = None
    jobs: list[JobRecords] = field(default_factory=list)
    unrecognised: int = 0
    """Files in the records directory not named as a job's record: never touched."""

    @property
    def stale(self) -> list[JobRecords]:
        return [job for job in self.jobs if job.stale]

    def kept(self, reason: str) -> list[JobRecords]:
        return [job for job in self.jobs if job.keep == reason]

    def items(self) -> Iterable[JobRecords]:
        return self.jobs

    def targets(self) -> Iterable[JobRecords]:
        return self.stale

    @property
    def target_count(self) -> int:
        return len(self.stale)

    def summary_json(self) -> dict[str, Any]:
        return {
            **self.selection_json(),
            "records_dir": str(self.records_dir),
            **(self.policy.to_json() if self.policy else {}),
            "jobs_found": len(self.jobs),
            "stale": len(self.stale),
            "kept_recent": len(self.kept(RECENT)),
            "kept_newest": len(self.kept(NEWEST)),
            "kept_committing": len(self.kept(COMMITTING)),
            "kept_unreadable": len(self.kept(UNREADABLE)),
            "stale_files": sum(len(job.files) for job in self.stale),
            "stale_bytes": sum(job.bytes for job in self.stale),
            "unrecognised": self.unrecognised,
            "unindexed": sum(job.unindexed for job in self.jobs),
            "other_jobs": self.other_jobs,
        }

    def describe(self) -> str:
        stale = self.stale
        return (
            f"{len(self.jobs)} jobs with records in {self.records_dir}; {len(stale)} may go "
            f"({format_size(sum(job.bytes for job in stale))}); kept: {len(self.kept(RECENT))} younger "
            f"than {self.age}, {len(self.kept(NEWEST))} of the newest, {len(self.kept(COMMITTING))} "
            f"committing, {len(self.kept(UNREADABLE))} unreadable; "
            f"{sum(job.unindexed for job in self.jobs)} without an index entry"
        )


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
    ACTION = ("prune", "pruned")
    ITEMS = "the records of {} jobs"

    index: IndexReport | None = None
    """The index entries written for the jobs kept that had none (none in a dry run)."""

    def _counts(self) -> dict[str, Any]:
        listing = self.listing
        return {
            **(listing.policy.to_json() if listing.policy else {}),
            "jobs_found": len(listing.jobs),
            "stale": len(listing.stale),
            "pruned": self.count(PRUNED),
            "would_prune": self.count(WOULD_PRUNE),
            "kept_recent": len(listing.kept(RECENT)),
            "kept_newest": len(listing.kept(NEWEST)),
            "kept_committing": len(listing.kept(COMMITTING)),
            "kept_unreadable": len(listing.kept(UNREADABLE)),
            "changed": self.count(CHANGED),
            "failed": self.count(FAILED),
            "files": self.totals["files"],
            "bytes": self.totals["bytes"],
            "unrecognised": listing.unrecognised,
            "indexed": len(self.index.indexed) if self.index else 0,
            "index_failed": len(self.index.errors) if self.index else 0,
        }

    def _where(self) -> str:
        return f"in {self.listing.records_dir}"

    def _details(self, counts: dict[str, Any]) -> str:
        newest = f"{counts['kept_newest']} of the newest, " if counts.get("keep_newest") else ""
        indexed = f"; indexed {counts['indexed']} kept jobs" if counts["indexed"] else ""
        unindexed = f", {counts['index_failed']} could not be indexed" if counts["index_failed"] else ""
        return (
            f"{counts['files']} files, {format_size(counts['bytes'])}; kept {counts['kept_recent']} recent, "
            f"{newest}{counts['kept_committing']} committing, {counts['kept_unreadable']} unreadable, "
            f"{counts['changed']} written to meanwhile{indexed}{unindexed}"
        )


@dataclass
class IndexReport:
    """The records index entries written for decided jobs that had none (`index_jobs`)."""

    records_dir: StorePath
    dry_run: bool
    indexed: list[str] = field(default_factory=list)
    """The jobs whose entry was written (or, in a dry run, would be)."""
    present: int = 0
    """Jobs already indexed (by their driver, or by another process meanwhile)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Why a job could not be indexed (its outcome unreadable), by job ID."""

    def to_json(self) -> dict[str, Any]:
        return {
            "records_dir": str(self.records_dir),
            "dry_run": self.dry_run,
            "indexed" if not self.dry_run else "would_index": len(self.indexed),
            "already_indexed": self.present,
            "failed": len(self.errors),
            "jobs": self.indexed,
            "failures": [{"job_id": job, "error": error} for job, error in sorted(self.errors.items())],
        }

    def describe(self) -> str:
        done = "Would index" if self.dry_run else "Indexed"
        return (
            f"{done} {len(self.indexed)} jobs in {self.records_dir} ({self.present} already indexed); "
            f"{len(self.errors)} failed{' (dry run)' if self.dry_run else ''}"
        )


def find_job_records(
    store: Store,
    scope: str | StorePath,
    *,
    older_than: timedelta | str | float = DEFAULT_RECORDS_OLDER_THAN,
    keep_newest: int | str | None = 0,
    max_job_duration: timedelta | str | float = DEFAULT_MAX_JOB_DURATION,
    job_id: str | None = None,
    now: datetime | None = None,
    allow_bucket_root: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
) -> RecordListing:
    """The jobs with records in `<scope>/_airflow_commit/`, each prunable or kept (and why), by the
    policy of `older_than`, `keep_newest` and `max_job_duration` (`record_policy`).

    One listing of the records directory; then, for each old job with an outcome but no record,
    one read of the outcome (through `job_control.inspect_job`) to tell COMMITTING from ABORTED.
    With `job_id`, only that job is selected, but the newest jobs are ranked among all.
    """
    policy = record_policy(older_than, keep_newest, max_job_duration)
    listing = RecordListing.select(
        scope, older_than=policy.older_than, job_id=job_id, now=now, allow_bucket_root=allow_bucket_root
    )
    listing.policy = policy
    records_dir = listing.scope.join(RECORDS_DIR)
    listing.records_dir = records_dir
    progress = progress or NoProgress()
    progress.start("Listing job records", None)
    grouped, listing.unrecognised = group_job_records(store, records_dir, progress.advance)
    clock = listing.now.timestamp()
    jobs = _apply_policy([_job(name, files, clock) for name, files in grouped.items()], policy)
    if job_id is not None:
        listing.other_jobs = len([job for job in jobs if job.job_id != job_id])
        jobs = [job for job in jobs if job.job_id == job_id]
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


def _job(job_id: str, files: list[tuple[str, FileStatus]], clock: float) -> JobRecords:
    newest = max(status.modified for _, status in files)
    return JobRecords(
        job_id=job_id,
        files=tuple(sorted((status for _, status in files), key=lambda status: status.path.key)),
        kinds=tuple(sorted({kind for kind, _ in files})),
        newest=newest,
        age_seconds=clock - newest,
    )


def _apply_policy(jobs: list[JobRecords], policy: RecordPolicy) -> list[JobRecords]:
    """The jobs by ID, each kept as recent (younger than the minimum age), as one of the
    `keep_newest` newest of the older ones, or prunable (keep None)."""
    limit = policy.older_than.total_seconds()
    old = sorted((job for job in jobs if job.age_seconds >= limit), key=lambda job: (-job.newest, job.job_id))
    newest = {job.job_id for job in old[: policy.keep_newest]}
    return sorted(
        (
            replace(job, keep=RECENT if job.age_seconds < limit else NEWEST if job.job_id in newest else None)
            for job in jobs
        ),
        key=lambda job: job.job_id,
    )


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
    """Delete the files of the listing's stale jobs; with `dry_run` only report them. Then write
    the missing index entries of the jobs kept (`index_jobs`; in a dry run, only count them).

    The records directory is listed once more; jobs whose files changed are left alone. Then the
    files go in three batches, by `_DELETE_ORDER` (a few requests in all on S3).
    `keep_outcomes` keeps every job's outcome for `report.outcomes` (the CLI's machine formats, `-o json|yaml|plain`).
    """
    stale = listing.stale
    left_alone: set[str] = set()  # the stale jobs whose files changed since the listing

    def prune_all(jobs: Iterable[JobRecords], record: Callable[[Any], None], bar: Progress) -> None:
        for outcome in _prune(store, listing, list(jobs), bar):
            if outcome.status == CHANGED:
                left_alone.add(outcome.job.job_id)
            record(outcome)

    report = RecordPruneReport.run_all(
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
    gone = {job.job_id for job in stale} - left_alone
    kept = [job for job in listing.jobs if job.job_id not in gone]
    report.index = index_jobs(store, listing, kept, dry_run=dry_run, threads=threads)
    return report


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
    batches: list[list[StorePath]] = [[] for _ in range(max(_DELETE_ORDER.values()) + 1)]
    for job in unchanged:
        for status in job.files:
            found = (
                job_file(status.path.relative_to(records_dir)) if status.path.is_under(records_dir) else None
            )
            if found is None or found[0] != job.job_id:
                raise AssertionError(f"refusing to delete {status.path}: not a file of job {job.job_id}")
            batches[_DELETE_ORDER[found[1]]].append(status.path)
    try:
        for batch in filter(None, batches):  # outcomes first: never leave a job that looks COMMITTING
            store.delete_files(batch)
    except StoreError as error:
        for job in unchanged:
            outcomes[job.job_id] = RecordOutcome(job, FAILED, one_line(error))
    else:
        for job in unchanged:
            outcomes[job.job_id] = RecordOutcome(job, PRUNED)
    bar.advance(len(jobs))
    return [outcomes[job.job_id] for job in jobs]


def index_jobs(
    store: Store, listing: RecordListing, jobs: list[JobRecords], *, dry_run: bool = False, threads: int = 8
) -> IndexReport:
    """Write the records index entry of each of `jobs` that has an outcome and no entry, from its
    outcome (its decision time names the entry), create-if-absent: an entry its driver or another
    process writes meanwhile is the same file, and stays as it is. One read and one write per job."""
    records_dir = listing.records_dir or listing.scope.join(RECORDS_DIR)
    report = IndexReport(
        records_dir, dry_run, present=sum(not job.unindexed and "outcome" in job.kinds for job in jobs)
    )
    missing = [job for job in jobs if job.unindexed]
    if dry_run:
        report.indexed = [job.job_id for job in missing]
        return report

    def index(job: JobRecords) -> bool | str:
        layout = JobLayout(listing.scope, job.job_id)
        try:
            outcome = JobOutcome.from_bytes(
                read_json_bytes(store, layout.outcome), str(layout.outcome), job.job_id
            )
            return write_entry(store, layout, outcome)
        except (InvalidCommitDataError, StoreError) as error:
            return one_line(error)

    for job, result in zip(missing, parallel_map(missing, index, threads), strict=True):
        if isinstance(result, str):
            report.errors[job.job_id] = result
        elif result:
            report.indexed.append(job.job_id)
        else:
            report.present += 1
    return report


def reindex_records(
    store: Store,
    scope: str | StorePath,
    *,
    dry_run: bool = False,
    allow_bucket_root: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
) -> IndexReport:
    """Write the missing records index entries of every decided job under `scope` (one listing of
    the records directory, then one read and one write per job without an entry)."""
    listing = RecordListing.select(
        scope, older_than=0, job_id=None, now=None, allow_bucket_root=allow_bucket_root
    )
    listing.records_dir = listing.scope.join(RECORDS_DIR)
    progress = progress or NoProgress()
    progress.start("Listing job records", None)
    grouped, listing.unrecognised = group_job_records(store, listing.records_dir, progress.advance)
    listing.jobs = [_job(name, files, listing.now.timestamp()) for name, files in sorted(grouped.items())]
    return index_jobs(store, listing, listing.jobs, dry_run=dry_run, threads=threads)


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

    `find_options` are those of `find_job_records` (older_than, keep_newest, max_job_duration,
    job_id, now, allow_bucket_root).
    """
    listing = find_job_records(store, scope, threads=threads, progress=progress, **find_options)
    return prune_records(
        store, listing, dry_run=dry_run, threads=threads, progress=progress, keep_outcomes=keep_outcomes
    )
