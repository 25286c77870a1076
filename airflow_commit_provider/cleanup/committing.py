"""Which jobs are past their commit point but not yet committed: what cleanup must never touch.

A job whose outcome says *commit* but which has no record yet (COMMITTING, see
`stages.job_state`) is committed: whoever comes next (a resumed driver, an abort, an Airflow
retry, `job_control.finish_or_fence`) rolls it forward, and for that it needs its pending
uploads and the manifests in its temporary tree. Aborting those uploads or deleting that tree
because they are old would leave part of the job's output visible for good, which is exactly
what the commit point exists to prevent. So upload cleanup and temp-tree cleanup ask here first
and leave such jobs alone, reporting them instead, however old they are.

Cost: one listing of `<destination>/_airflow_commit/` per destination asked about, plus one
read of the outcome (and a status or two) for each job found with an outcome and no record.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_commit_provider.cleanup.spool import batches
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.layout import RECORDS_DIR, parse_record_name
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store, StoreError

__all__ = ["committing_jobs", "undecided_jobs"]

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
