"""What a commit did, read back for people: the commit report behind the CLI and the UI page.

Built from the job's records under `_airflow_commit/` (its decision, its record, its delivery
marker), never from a listing of the table: a report costs a few reads whether the job wrote ten
files or a million. The record keeps totals per task, phase and partition, and names the job's
file list (`core.formats.file_list`), whose pages are read through ranged reads: a page costs the
list's footer and the row group it lies in, never the whole list. A record from before the file
list pages the files its table's `_SUCCESS` lists inline, while that is still the job's. The
partitions are paged too (`partition_rows`): past the inline ones, from the job's partition list,
so a report of a job that wrote 10,000 partitions reads one page of them.

A job with no records of ours - one of Hadoop's own committers (engine="hadoop"), or ours once its
records were pruned - is reported from the `_SUCCESS` that names it, while that is the table's:
its committer, host, time, files and bytes, the files it lists (Hadoop's, the first 100, without
sizes), and what its committer counted and timed (`iostatistics`) and noted (`diagnostics`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from airflow_commit_provider.core.formats.attempts import LostAttempt
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import (
    ListRef,
    partition_order_key,
    read_file_list_page,
    read_partition_page,
)
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.phases import CommitPhase
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.job_control import JobState, JobStatus, inspect_job
from airflow_commit_provider.core.layout import RECORDS_DIR, SUCCESS_FILENAME, JobLayout, is_job_id
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.records_index import newest_jobs
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store
from airflow_commit_provider.core.task_key import TryOrigin
from airflow_commit_provider.report.commit_statistics import CommitStatistics, commit_statistics
from airflow_commit_provider.success.check import hadoop_listed_path

__all__ = [
    "CommitPage",
    "CommitReport",
    "CommitSummary",
    "ListedFile",
    "PartitionReport",
    "TaskReport",
    "list_commit_page",
    "list_commits",
    "load_commit",
    "partition_count",
    "partition_rows",
]

#: Files per page of a report's file list, and partitions per page of its partition table.
PAGE_SIZE = 100
#: How much of the table's `_SUCCESS` the list of commits reads: Hadoop's, which name 100 files at
#: most, take a few KiB; ours list every file, and their jobs are listed from their records.
LISTED_SUCCESS_BYTES = 1024 * 1024


@dataclass(frozen=True)
class TaskReport:
    """The attempt whose commit a task contributed, as the job's decision names it."""

    task_id: str
    attempt_id: str
    files: int
    bytes: int
    rows: int | None
    started_at: int | None
    committed_at: int | None
    adopted_by: str | None
    """A later attempt (a speculative copy, a retry) that found this one committed and adopted it."""

    @property
    def outcome(self) -> str:
        return "adopted" if self.adopted_by else "committed"


@dataclass(frozen=True)
class PartitionReport:
    """What one partition directory received from the job."""

    partition: str
    files: int
    bytes: int
    rows: int | None


@dataclass(frozen=True)
class CommitSummary:
    """One job, as a row of a destination's list of recent commits."""

    job_id: str
    state: str
    """unknown, active, committing, committed or aborted (`JobState`)."""
    committer: str | None
    decided_at: int | None
    """When the commit point (or the abort) was decided, epoch milliseconds."""
    finished_at: int | None
    """When the job record was written (the commit finished), epoch milliseconds."""
    started_at: int | None
    """When the first task attempt began (committed or lost), epoch milliseconds, when recorded."""
    origin: TryOrigin | None
    reason: str
    """Why the job was aborted (empty for a commit)."""
    files: int | None
    bytes: int | None
    rows: int | None
    delivered: bool

    @property
    def duration_ms(self) -> int | None:
        end = self.finished_at or self.decided_at
        return end - self.started_at if end is not None and self.started_at is not None else None


@dataclass(frozen=True)
class ListedFile:
    """One file of a report's file list; Hadoop's `_SUCCESS` names its files without sizes."""

    uri: str
    size: int | None


@dataclass(frozen=True)
class CommitReport:
    """One job's commit in full: its tasks, the phases of its job commit, its partitions, a page
    of its files, and the summary its `_SUCCESS` gives."""

    destination: str
    summary: CommitSummary
    conflict_mode: str | None
    tasks: tuple[TaskReport, ...]
    phases: tuple[CommitPhase, ...]
    partitions: tuple[PartitionReport, ...]
    """Page `partition_page` of the partitions the job wrote, in path order."""
    success: dict[str, object] | None
    lost_attempts: tuple[LostAttempt, ...] = ()
    """The attempts that were not their task's commit, as the job record keeps them."""
    lost_attempts_left_out: dict[str, int] = field(default_factory=dict)
    """Per task, how many more attempts lost than the record lists."""
    files_page: tuple[ListedFile, ...] = ()
    page: int = 0
    page_size: int = PAGE_SIZE
    pages: int = 1
    listed_files: int = 0
    """How many files the list pages through."""
    files_missing: str | None = None
    """Why the file list cannot be shown (an older record whose table's `_SUCCESS` belongs to a later
    job, or a file list that is gone or damaged)."""
    statistics: CommitStatistics | None = None
    from_success: bool = False
    """Built from the table's `_SUCCESS` alone: the job left no records of ours."""
    partition_page: int = 0
    partition_pages: int = 1
    partition_count: int = 0
    """How many partitions the job wrote (the partition table pages through them)."""


@dataclass(frozen=True)
class CommitPage:
    """One page of a destination's list of commits, newest first."""

    commits: list[CommitSummary]
    after: str | None
    """The cursor of the next (older) page, or None on the last page."""


def list_commits(
    store: Store, destination: str | StorePath, limit: int = 50, threads: int = 8
) -> list[CommitSummary]:
    """The `limit` most recent jobs with records under `destination`, newest first (`list_commit_page`'s first page)."""
    return list_commit_page(store, destination, limit, threads=threads).commits


def list_commit_page(
    store: Store,
    destination: str | StorePath,
    limit: int = 50,
    after: str | None = None,
    threads: int = 8,
) -> CommitPage:
    """The `limit` jobs of `destination` that follow the cursor `after` (the newest without one).

    The jobs come from the records index (`records_index.newest_jobs`): one listing of at most
    `limit` keys, whatever the number of jobs; then each job's records are read (GET-only,
    `inspect_job`). A job whose records were pruned meanwhile is left out. On the first page the
    table's `_SUCCESS` is read too, up to `LISTED_SUCCESS_BYTES`: when it names a job without
    records (Hadoop's committers keep none), that job made the table's latest commit and is listed first.
    """
    root = StorePath.parse(destination)
    success = _table_success(store, root, LISTED_SUCCESS_BYTES)[0] if after is None else None
    page = newest_jobs(store, root, limit, after)
    jobs, cursor = page.jobs, page.after
    job_ids = list(dict.fromkeys(job_id for _, job_id in jobs))
    statuses = parallel_map(job_ids, lambda job_id: inspect_job(store, root, job_id), threads)
    known = {status.job_id: status for status in statuses if status.state is not JobState.UNKNOWN}
    latest = _unrecorded(store, root, success, known, set(job_ids))
    if latest is not None and len(jobs) >= limit:  # the table's latest commit takes the last place
        jobs = jobs[: limit - 1]
        cursor = jobs[-1][0] if jobs else ""
    shown = dict.fromkeys(job_id for _, job_id in jobs if job_id in known)
    summaries = [_summary(known[job_id]) for job_id in shown]
    return CommitPage(([latest] if latest is not None else []) + summaries, cursor)


def _unrecorded(
    store: Store,
    root: StorePath,
    success: SuccessData | None,
    known: Mapping[str, JobStatus],
    listed: set[str],
) -> CommitSummary | None:
    """The job `success` names, when it has no records of ours: unknown on the page, or off the
    page and without an outcome."""
    if success is None or not success.job_id or success.job_id in known:
        return None
    outcome = JobLayout(root, success.job_id).outcome if is_job_id(success.job_id) else None
    if success.job_id not in listed and outcome is not None and store.get_status(outcome) is not None:
        return None
    return _summary_of_success(success)


def load_commit(
    store: Store,
    destination: str | StorePath,
    job_id: str,
    page: int = 0,
    page_size: int = PAGE_SIZE,
    partition_page: int = 0,
) -> CommitReport:
    """The report of job `job_id` under `destination`, with page `page` of its files and page
    `partition_page` of its partitions.

    A job without records is reported from the table's `_SUCCESS` when that names it. Raises
    ValueError naming the job when neither the records nor the `_SUCCESS` know it, or naming the
    list whose page is out of range.
    """
    root = StorePath.parse(destination)
    status = inspect_job(store, root, job_id)
    if status.state is JobState.UNKNOWN:
        return _report_of_success(store, root, job_id, page, page_size, partition_page)
    record, outcome = status.record, status.outcome
    files = _committed_files(store, root, record) if record is not None else _Files(0)
    first, pages = _page(files.count, job_id, page, page_size, "file list")
    files_page, files_missing = files.page(first, page_size)
    partitions = _partition_page(store, root, record, job_id, partition_page, page_size)
    return CommitReport(
        destination=root.uri(),
        summary=_summary(status),
        conflict_mode=outcome.conflict_mode if outcome is not None else None,
        tasks=_tasks(outcome),
        phases=tuple(record.phases or ()) if record is not None else (),
        partitions=partitions.rows,
        partition_page=partition_page,
        partition_pages=partitions.pages,
        partition_count=partitions.count,
        success=record.summary() if record is not None else None,
        lost_attempts=tuple(record.lost_attempts or ()) if record is not None else (),
        lost_attempts_left_out=dict(record.lost_attempts_left_out or {}) if record is not None else {},
        files_page=files_page,
        page=page,
        page_size=page_size,
        pages=pages,
        listed_files=files.count,
        files_missing=files_missing,
        statistics=commit_statistics(record) if record is not None else None,
    )


def _report_of_success(
    store: Store, root: StorePath, job_id: str, page: int, page_size: int, partition_page: int
) -> CommitReport:
    """The report of a job without records, from the table's `_SUCCESS` if that names it."""
    success, problem = _table_success(store, root)
    if success is None or success.job_id != job_id:
        found = problem or f"{root.join(SUCCESS_FILENAME)} names job {success.job_id if success else ''!r}"
        raise ValueError(f"{root.join(RECORDS_DIR).uri()}: no records of job {job_id!r}, and {found}")
    files = _listed_files(store, root, success)
    first, pages = _page(files.count, job_id, page, page_size, "file list")
    files_page, files_missing = files.page(first, page_size)
    partitions = _partition_page(store, root, success, job_id, partition_page, page_size)
    return CommitReport(
        destination=root.uri(),
        summary=_summary_of_success(success),
        conflict_mode=None,
        tasks=(),
        phases=tuple(success.phases or ()),
        partitions=partitions.rows,
        partition_page=partition_page,
        partition_pages=partitions.pages,
        partition_count=partitions.count,
        success=success.summary(),
        files_page=files_page,
        page=page,
        page_size=page_size,
        pages=pages,
        listed_files=files.count,
        files_missing=files_missing,
        statistics=commit_statistics(success),
        from_success=True,
    )


def _page(count: int, job_id: str, page: int, page_size: int, listed: str) -> tuple[int, int]:
    """(index of the page's first entry, number of pages) of `count` entries, or a ValueError for a
    page out of range naming the `listed` list."""
    pages = max(1, -(-count // page_size))
    if not 0 <= page < pages:
        raise ValueError(f"page {page} of job {job_id!r}: the {listed} has pages 0 to {pages - 1}")
    return page * page_size, pages


def _summary(status: JobStatus) -> CommitSummary:
    outcome, record = status.outcome, status.record
    lost = (record.lost_attempts or []) if record is not None else []
    starts = [task.started_at for task in _tasks(outcome) if task.started_at is not None]
    starts += [attempt.started_at for attempt in lost if attempt.started_at is not None]
    return CommitSummary(
        job_id=status.job_id,
        state=status.state.value,
        committer=status.committer,
        decided_at=outcome.timestamp if outcome is not None else None,
        finished_at=record.timestamp if record is not None else None,
        started_at=min(starts) if starts else None,
        origin=outcome.origin if outcome is not None else None,
        reason="" if outcome is None or outcome.committing else outcome.reason,
        files=record.committed_file_count()[0] if record is not None else None,
        bytes=record.total_bytes if record is not None else None,
        rows=record.rows if record is not None else None,
        delivered=status.delivered,
    )


def _summary_of_success(success: SuccessData) -> CommitSummary:
    """A job known only from its `_SUCCESS`: no decision, no Airflow try, no delivery marker."""
    failed = "" if success.success else success.diagnostics.get("exception") or "the _SUCCESS says it failed"
    return CommitSummary(
        job_id=success.job_id,
        state=(JobState.COMMITTED if success.success else JobState.ABORTED).value,
        committer=success.committer or None,
        decided_at=None,
        finished_at=success.timestamp or None,
        started_at=None,
        origin=None,
        reason=str(failed),
        files=success.committed_file_count()[0],
        bytes=success.committed_bytes(),
        rows=success.rows,
        delivered=False,
    )


def _tasks(outcome: JobOutcome | None) -> tuple[TaskReport, ...]:
    if outcome is None:
        return ()
    return tuple(
        TaskReport(
            task_id=result.task_id,
            attempt_id=result.task_attempt_id,
            files=_count(result.files),
            bytes=_count(result.bytes),
            rows=_optional_count(result.rows),
            started_at=_optional_count(result.started_at),
            committed_at=_optional_count(result.committed_at),
            adopted_by=result.adopted_from if isinstance(result.adopted_from, str) else None,
        )
        for result in sorted(outcome.committed, key=lambda result: result.task_id)
    )


@dataclass(frozen=True)
class _PartitionPage:
    rows: tuple[PartitionReport, ...]
    pages: int
    count: int


def _partition_page(
    store: Store, root: StorePath, record: SuccessData | None, job_id: str, page: int, page_size: int
) -> _PartitionPage:
    """Page `page` of the job's partitions, with the number of pages and of partitions."""
    count = partition_count(record)
    first, pages = _page(count, job_id, page, page_size, "partition table")
    rows = () if record is None else tuple(partition_rows(store, root, record, first, page_size))
    return _PartitionPage(rows, pages, count)


def partition_count(record: SuccessData | None) -> int:
    """How many partitions the job wrote: its partition list's count, else its record's statistics'."""
    if record is None:
        return 0
    if record.partition_list is not None and record.partition_count is not None:
        return record.partition_count
    return len(record.partition_stats or {})


def partition_rows(
    store: Store, root: StorePath, record: SuccessData, first: int, count: int
) -> Iterator[PartitionReport]:
    """The job's partitions `first` to `first + count`, in the partition list's order
    (`partition_order_key`), with what each received.

    Up to ``PARTITIONS_LIMIT`` partitions the record's ``partitionStats`` lists them all; past it,
    they are rows of the job's partition list (``docs/bounded-commits.md``: ``partitionList``), read
    a page at a time through ranged reads, never whole.
    """
    if record.partition_list is not None:
        source = f"the record of job {record.job_id}"
        found = read_partition_page(store, root, record.partition_list, first, count, source)
    else:
        stats = record.partition_stats or {}
        names = sorted(stats, key=partition_order_key)[first : first + count]
        found = [(name, stats[name]) for name in names]
    for name, received in found:
        yield PartitionReport(name, received.files, received.bytes, received.rows)


@dataclass(frozen=True)
class _Files:
    """The files a report pages through, `count` of them: listed inline (older `_SUCCESS` files of
    ours, Hadoop's first 100), or in a file list read a page at a time (`store`, the root its
    reference is relative to, the reference, the file naming it); `missing` says why there are none."""

    count: int
    inline: Sequence[ListedFile] = ()
    file_list: tuple[Store, StorePath, ListRef, str] | None = None
    missing: str | None = None

    def page(self, first: int, size: int) -> tuple[tuple[ListedFile, ...], str | None]:
        """Files `first` to `first + size`, and why there are none when the list cannot be read.
        A page of the file list costs its footer and the row group it lies in (ranged reads)."""
        if self.file_list is None:
            return tuple(self.inline[first : first + size]), self.missing
        store, root, ref, source = self.file_list
        try:
            entries = read_file_list_page(store, root, ref, first, size, source)
        except FileNotFoundInStoreError:
            return (), f"no list of files: {ref.path_under(root)} is gone (pruned with the job's records?)"
        except InvalidCommitDataError as error:
            return (), f"no list of files: {' '.join(str(error).split())}"
        return tuple(ListedFile(entry.uri, entry.size) for entry in entries), None


def _committed_files(store: Store, root: StorePath, record: SuccessData) -> _Files:
    """The job's files: its file list, whose size its reference gives. A record from before the
    file list keeps totals only: its files are those the table's `_SUCCESS` lists inline while it
    is still the job's; else none, and why."""
    if record.file_list is not None:
        source = f"the record of job {record.job_id}"
        return _Files(record.file_list.entries, file_list=(store, root, record.file_list, source))
    success, problem = _table_success(store, root)
    if success is None:
        return _Files(0, missing=f"no list of files: {problem}")
    if success.job_id != record.job_id:
        return _Files(
            0,
            missing=f"{root.join(SUCCESS_FILENAME)} now lists the files of job {success.job_id}, a later commit",
        )
    return _listed_files(store, root, success)


def _table_success(
    store: Store, root: StorePath, limit: int | None = None
) -> tuple[SuccessData | None, str | None]:
    """The table's `_SUCCESS` (when no larger than `limit` bytes), else None and why there is none."""
    marker = root.join(SUCCESS_FILENAME)
    try:
        data = store.read_bytes(marker) if limit is None else store.read_bytes_within(marker, limit)
        if data is None:
            return None, f"{marker} is larger than {limit:,} bytes"
        return SuccessData.from_bytes(data, str(marker)), None
    except FileNotFoundInStoreError:
        return None, f"there is no {marker}"
    except InvalidCommitDataError as error:
        return None, str(error)


def _listed_files(store: Store, root: StorePath, success: SuccessData) -> _Files:
    """Ours name their file list (older ones list every file inline, with its size); Hadoop's name
    the first 100, as keys or URIs."""
    if success.file_list is not None:
        source = str(root.join(SUCCESS_FILENAME))
        return _Files(success.file_list.entries, file_list=(store, root, success.file_list, source))
    if success.files is not None:
        return _Files(len(success.files), [ListedFile(f.uri, f.size) for f in success.files])
    names = [ListedFile(hadoop_listed_path(name, root).uri(), None) for name in success.filenames]
    return _Files(len(names), names)


def _count(value: object) -> int:
    """A count from an outcome's task entry; the outcome's own check covers only task and attempt
    IDs, so a foreign value shows as 0 rather than breaking the report."""
    return _optional_count(value) or 0


def _optional_count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
