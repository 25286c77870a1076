"""Which jobs cleanup must never touch: those past their commit point but not yet committed, and
those still live.

A job whose outcome says *commit* but which has no record yet (COMMITTING, see
`stages.job_state`) is committed: whoever comes next (a resumed driver, an abort, an Airflow
retry, `job_control.finish_or_fence`) rolls it forward, and for that it needs its pending
uploads and the manifests in its temporary tree. Aborting those uploads or deleting that tree
because they are old would leave part of the job's output visible for good, which is exactly
what the commit point exists to prevent. So upload cleanup and temp-tree cleanup ask here first
and leave such jobs alone, reporting them instead, however old they are.

Cost: one listing of `<destination>/_airflow_commit/` per destination asked about, plus one
read of the outcome (and a status or two) for each job found with an outcome and no record.

A live job (`live_jobs`) is one that is set up and not decided (ACTIVE: its job marker, no
outcome) and set up less than its longest duration ago: the `maxJobSeconds` its marker records
(the task's ``execution_timeout``, `CommitOptions.max_job_duration`), else the cleanup's
`max_job_duration` (default `DEFAULT_MAX_JOB_DURATION`, 7 days). Its uploads are spared however
old: a job that runs longer than the cleanup's age threshold still needs them at job commit. Past
that fence the job is taken as abandoned (its driver gone without aborting): if it ever came back,
job commit would find its uploads gone before its commit point and fail, leaving nothing visible.
Cost: a one-level listing per destination (and one of its ``_temporary/`` where there is one),
then a status of the outcome and a read of the marker for each job found there.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from airflow_commit_provider.cleanup.spool import batches
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import load_json, read_json_bytes
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.layout import (
    MAGIC_PREFIX,
    RECORDS_DIR,
    TEMPORARY_DIR,
    JobLayout,
    is_job_id,
    parse_record_name,
)
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.job_state import MAX_JOB_SECONDS
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store, StoreError

__all__ = ["committing_jobs", "live_jobs", "undecided_jobs"]

#: Destinations whose records are listed at once.
_BATCH = 256


def undecided_jobs(store: Store, destination: StorePath) -> set[str]:
    """Jobs with an outcome but no record in `destination`'s records directory (one listing)."""
    kinds: dict[str, set[str]] = {}
    records_dir = destination.join(RECORDS_DIR)
    for status in store.list_files(records_dir):
        parsed = parse_record_name(status.path.name) if status.path.parent == records_dir else None
        if parsed is not None:
            kinds.setdefault(parsed[0], set()).add(parsed[1])
    return {job for job, present in kinds.items() if "outcome" in present and "success" not in present}


def committing_jobs(
    store: Store, destinations: Iterable[StorePath], threads: int = 8
) -> set[tuple[StorePath, str]]:
    """(destination, job ID) of every COMMITTING job in the given (distinct) destinations.

    The destinations are read a batch at a time, so a stream of them (one per partition of a
    scope) is never held whole. A job whose outcome cannot be read counts as committing: when in
    doubt, cleanup keeps.
    """

    def is_committing(candidate: tuple[StorePath, str]) -> bool:
        destination, job = candidate
        try:
            return inspect_job(store, destination, job).state == JobState.COMMITTING
        except (InvalidCommitDataError, StoreError):
            return True

    found: set[tuple[StorePath, str]] = set()
    for places in batches(destinations, _BATCH):
        candidates = [
            (destination, job)
            for destination, jobs in zip(
                places, parallel_map(places, lambda d: undecided_jobs(store, d), threads), strict=True
            )
            for job in sorted(jobs)
        ]
        found.update(
            candidate
            for candidate, committing in zip(
                candidates, parallel_map(candidates, is_committing, threads), strict=True
            )
            if committing
        )
    return found


def live_jobs(
    store: Store,
    destinations: Iterable[StorePath],
    now: datetime,
    max_job_duration: timedelta,
    threads: int = 8,
) -> set[tuple[StorePath, str]]:
    """(destination, job ID) of every live job in the given (distinct) destinations: set up, not
    decided, and set up less than its longest duration before `now` (see the module doc).

    A marker that is not ours to read (not our JSON) dates the job by when it was written, so it
    shields the job only until the fence; a job the store cannot answer about counts as live: when
    in doubt, cleanup keeps.
    """
    clock = now.timestamp()

    def set_up_here(destination: StorePath) -> list[tuple[StorePath, str, bool]]:
        """(destination, job ID, magic layout) of every job folder directly under `destination`:
        one listing of it, and one of its ``_temporary/`` when it has one."""
        names = store.list_child_dirs(destination)
        magic = [
            name.removeprefix(MAGIC_PREFIX)
            for name in names
            if name.startswith(MAGIC_PREFIX) and is_job_id(name.removeprefix(MAGIC_PREFIX))
        ]
        staged = store.list_child_dirs(destination.join(TEMPORARY_DIR)) if TEMPORARY_DIR in names else []
        return [(destination, job, False) for job in staged if is_job_id(job)] + [
            (destination, job, True) for job in magic
        ]

    def is_live(candidate: tuple[StorePath, str, bool]) -> bool:
        destination, job, magic = candidate
        layout = JobLayout(destination, job, magic)
        try:
            if store.get_status(layout.outcome) is not None:
                return False  # decided: committed, committing (kept for that reason) or aborted
            data = read_json_bytes(store, layout.job_marker)
        except InvalidCommitDataError:
            data = b""  # too large to be ours: dated by when it was written
        except FileNotFoundInStoreError:
            return False  # no marker: never set up by us, or cleaned up since
        except StoreError:
            return True  # cannot tell: when in doubt, keep
        return clock - _set_up_at(store, layout, data) < _longest(data, max_job_duration)

    found: set[tuple[StorePath, str]] = set()
    for places in batches(destinations, _BATCH):
        candidates = [job for jobs in parallel_map(places, set_up_here, threads) for job in jobs]
        found.update(
            (destination, job)
            for (destination, job, _magic), live in zip(
                candidates, parallel_map(candidates, is_live, threads), strict=True
            )
            if live
        )
    return found


def _set_up_at(store: Store, layout: JobLayout, data: bytes) -> float:
    """When the job was set up (epoch seconds): its marker's ``created``, else (a marker that is not
    ours to read) when the marker was written, so no unreadable marker shields a job for ever."""
    try:
        return float(load_json(data, str(layout.job_marker))["created"]) / 1000
    except (InvalidCommitDataError, KeyError, TypeError, ValueError):
        status = store.get_status(layout.job_marker)
        return status.modified if status is not None else 0.0


def _longest(data: bytes, fallback: timedelta) -> float:
    """The job's own longest duration from its marker (`MAX_JOB_SECONDS`), else `fallback`."""
    try:
        seconds = load_json(data, "job marker").get(MAX_JOB_SECONDS)
        return float(seconds) if seconds else fallback.total_seconds()
    except (InvalidCommitDataError, AttributeError, TypeError, ValueError):
        return fallback.total_seconds()
