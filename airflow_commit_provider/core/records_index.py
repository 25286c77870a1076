"""The records index: a destination's newest jobs from one short listing, however many it holds.

Every job that reaches a decision (commit or abort) gets one entry under
`<destination>/_airflow_commit/_index/`, named by its inverted decision time
(`layout.index_entry_name`): S3 lists keys in ascending order, so the first N keys of one listing
are the N newest decisions, and the next page is the listing resumed after the last key.

Entries are created once, if absent, and never rewritten or read back to be changed: the store
offers only create-if-absent, and an index read, changed and written back would lose the updates
of concurrent jobs. An entry's name comes from the job's outcome alone (its job ID and decision
time), so whoever writes it - the deciding driver, a process that follows the decision, or a
records prune - writes the same name, and the first write wins.

It is written right after the job's outcome stands (`stages.job_state.decide`), so every listed
job has its outcome. A driver that dies between the two leaves a decided job without an entry:
the next process that decides about the job (an abort, an Airflow retry's `finish_or_fence`)
writes it, and so does the next records prune (`records prune` and `records reindex` write the
entries of kept jobs that lack one). Until then the job is not lost: once the index is exhausted,
`newest_jobs` lists the records folder for the jobs without an entry (as are those of jobs from
before the index) and lists them after every indexed job, newest first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.job_records import group_job_records
from airflow_commit_provider.core.layout import (
    RECORDS_DIR,
    RECORDS_INDEX_DIR,
    JobLayout,
    index_entry_name,
    parse_index_entry_name,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileAlreadyExistsError, Store

__all__ = ["INDEX_ENTRY_NAME", "UNINDEXED", "JobsPage", "entry_bytes", "newest_jobs", "write_entry"]

INDEX_ENTRY_NAME = "airflow_commit.RecordsIndexEntry/1"
#: What a cursor of the jobs without an entry starts with: `~` sorts after every entry's name
#: (which starts with a digit), so those jobs come after every indexed one, in one order.
UNINDEXED = "~"


def entry_bytes(outcome: JobOutcome) -> bytes:
    """The body of the job's entry: what the decision was, by whom and when (the name says when
    too); the job's state after it (committing, committed, delivered) is read from its records."""
    entry = {
        "name": INDEX_ENTRY_NAME,
        "jobId": outcome.job_id,
        "decision": outcome.decision,
        "committer": outcome.committer,
        "decidedAt": outcome.timestamp,
    }
    return json.dumps(entry).encode("utf-8")


def write_entry(store: Store, layout: JobLayout, outcome: JobOutcome) -> bool:
    """Create the entry of the job's standing `outcome` unless it exists; whether this call made it."""
    try:
        store.write_bytes(layout.index_entry(outcome.timestamp), entry_bytes(outcome), if_absent=True)
    except FileAlreadyExistsError:
        return False
    return True


@dataclass(frozen=True)
class JobsPage:
    """One page of a destination's jobs, newest first."""

    jobs: list[tuple[str, str]]
    """(cursor, job ID) of each job: its index entry's name, or for a job without one, `UNINDEXED`
    and the name an entry at its newest record's time would have."""
    after: str | None
    """The cursor of the next page (the last job's), or None when this page holds the last job."""


def newest_jobs(store: Store, destination: str | StorePath, limit: int, after: str | None = None) -> JobsPage:
    """The `limit` jobs of `destination` after the cursor `after` (from the start without one).

    Indexed jobs cost one listing of at most `limit` keys. Once the index is exhausted, the
    records folder is listed once for the jobs without an entry, which follow.
    """
    if limit < 1:
        raise ValueError(f"limit: a page lists at least 1 job, got {limit!r}")
    _check_cursor(after)
    root = StorePath.parse(destination)
    index_dir = root.join(RECORDS_DIR, RECORDS_INDEX_DIR)
    indexed: list[tuple[str, str]] = []
    if after is None or not after.startswith(UNINDEXED):
        for status in store.list_page(index_dir, limit=limit, after=after or ""):
            parsed = parse_index_entry_name(status.path.relative_to(index_dir))
            if parsed is not None:
                indexed.append((status.path.name, parsed[0]))
        if len(indexed) == limit:
            return JobsPage(indexed, indexed[-1][0])
    unindexed = [job for job in _unindexed_jobs(store, root) if job[0] > (after or UNINDEXED)]
    jobs = indexed + unindexed[: limit - len(indexed)]
    return JobsPage(jobs, jobs[-1][0] if len(unindexed) > limit - len(indexed) else None)


def _unindexed_jobs(store: Store, root: StorePath) -> list[tuple[str, str]]:
    """The jobs with records but no index entry, by cursor: newest record first (one listing)."""
    grouped, _ = group_job_records(store, root.join(RECORDS_DIR))
    return sorted(
        (UNINDEXED + index_entry_name(job_id, int(max(s.modified for _, s in files) * 1000)), job_id)
        for job_id, files in grouped.items()
        if all(kind != "index" for kind, _ in files)
    )


def _check_cursor(after: str | None) -> None:
    """Refuse a cursor that no page of this list ends with, naming it. The empty cursor starts
    from the first job (a first page that the table's latest commit filled ends with it)."""
    if after is None or after == "":
        return
    if not isinstance(after, str) or parse_index_entry_name(after.removeprefix(UNINDEXED)) is None:
        raise ValueError(
            f"after: {after!r} is not a cursor of a list of commits (the name of an index entry, "
            f"<13 digits>-<job ID>.json, or that preceded by {UNINDEXED!r})"
        )
