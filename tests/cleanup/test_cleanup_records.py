"""Pruning job records from `<destination>/_airflow_commit/` by age, on both stores.

Records are made by real committers (commit, abort, a commit interrupted after its commit point).
Ages are controlled without waiting: `now` is placed relative to the store's own modification
times, or (locally) the files' modification times are set back.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import pytest
from cleanup_support import keys_under, write_files
from support.committed_jobs import abort, commit, interrupt_after_commit_point
from support.faults import FaultInjectingStore, SimulatedCrash

from airflow_commit_provider.core.cleanup import (
    clean_stale_temp_trees,
    find_job_records,
    prune_old_records,
    prune_records,
)
from airflow_commit_provider.core.job_control import JobState, finish_or_fence, inspect_job, mark_delivered
from airflow_commit_provider.core.layout import RECORDS_DIR, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

MONTH = timedelta(days=30)


def records(store: Store, dest: StorePath) -> set[str]:
    return keys_under(store, dest.join(RECORDS_DIR))


def newest(store: Store, dest: StorePath, job_id: str) -> datetime:
    """The newest modification time of the job's records, as the store reports it."""
    times = [
        s.modified for s in store.list_files(dest.join(RECORDS_DIR)) if s.path.name.startswith(f"{job_id}.")
    ]
    return datetime.fromtimestamp(max(times), tz=timezone.utc)


def test_a_job_is_pruned_exactly_when_its_newest_record_is_older_than_the_limit(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    mark_delivered(store, dest, "job-a")
    before = records(store, dest)
    assert before == {"job-a.outcome.json", "job-a.success.json", "job-a.delivered.json"}
    edge = newest(store, dest, "job-a") + MONTH  # datetimes are microseconds; local mtimes finer
    young = prune_old_records(store, dest, older_than="30d", now=edge - timedelta(milliseconds=1))
    assert (young.to_json()["kept_recent"], young.to_json()["pruned"]) == (1, 0)
    assert records(store, dest) == before, "a record a millisecond younger than the limit stays"
    edge += timedelta(milliseconds=1)

    dry = prune_old_records(store, dest, older_than="30d", now=edge, dry_run=True)
    assert dry.to_json()["would_prune"] == 1 and dry.to_json()["files"] == 3
    assert records(store, dest) == before, "a dry run changes nothing"

    pruned = prune_old_records(store, dest, older_than=MONTH, now=edge)
    report = pruned.to_json()
    assert (report["pruned"], report["files"], report["failed"], report["sample"]) == (1, 3, 0, ["job-a"])
    assert records(store, dest) == set()
    assert keys_under(store, dest) >= {"_SUCCESS", "dt=1/_SUCCESS"}, "output and markers untouched"
    assert inspect_job(store, dest, "job-a").state == JobState.UNKNOWN


def test_only_old_jobs_go_when_ages_are_mixed(tmp_path: os.PathLike[str]) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    store, dest = LocalStore(), StorePath.parse(f"{tmp_path}/table")
    for job_id in ("job-old", "job-mixed", "job-new"):
        commit(store, dest, job_id)
    abort(store, dest, "job-old-abort")
    real_now = datetime.now(timezone.utc)

    def set_age(job_id: str, kind: str, age: timedelta) -> None:
        path = os.path.join(dest.key, RECORDS_DIR, f"{job_id}.{kind}.json")
        stamp = (real_now - age).timestamp()
        os.utime(path, (stamp, stamp))

    for kind in ("outcome", "success"):
        set_age("job-old", kind, timedelta(days=40))
    set_age("job-old-abort", "outcome", timedelta(days=31))
    set_age("job-mixed", "outcome", timedelta(days=40))  # its record is young: the job stays whole
    listing = find_job_records(store, dest, older_than="30d", now=real_now)
    assert {job.job_id: job.keep for job in listing.jobs} == {
        "job-old": None,
        "job-old-abort": None,
        "job-mixed": "recent",
        "job-new": "recent",
    }
    assert next(job for job in listing.jobs if job.job_id == "job-old-abort").state == "aborted"
    report = prune_records(store, listing).to_json()
    assert (report["pruned"], report["kept_recent"]) == (2, 2)
    assert records(store, dest) == {
        "job-mixed.outcome.json",
        "job-mixed.success.json",
        "job-new.outcome.json",
        "job-new.success.json",
    }


def test_a_commit_in_progress_keeps_its_decision(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("table")
    interrupt_after_commit_point(store, dest, "job-c")
    abort(store, dest, "job-x")
    later = datetime.now(timezone.utc) + 2 * MONTH

    listing = find_job_records(store, dest, older_than="30d", now=later)
    kept = next(job for job in listing.jobs if job.job_id == "job-c")
    assert (kept.state, kept.keep, kept.stale) == ("committing", "committing", False)
    report = prune_records(store, listing).to_json()
    assert (report["pruned"], report["kept_committing"], report["sample"]) == (1, 1, ["job-x"])
    assert records(store, dest) == {"job-c.outcome.json"}, "the decision stays; job-x's abort went"

    # Rolled forward, the job is committed; once its record is old too, it may go.
    assert finish_or_fence(store, dest, "job-c", "partitioned").state == JobState.COMMITTED
    assert prune_old_records(store, dest, older_than="30d", now=later).to_json()["pruned"] == 1
    assert records(store, dest) == set()


def test_scope_is_one_directory_and_only_record_files_are_touched(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dataset1, dataset10 = root.join("out", "dataset1"), root.join("out", "dataset10")
    commit(store, dataset1, "job-1")
    commit(store, dataset10, "job-10")
    write_files(store, dataset1, [f"{RECORDS_DIR}/notes.txt", f"{RECORDS_DIR}/sub/job-9.success.json"])
    neighbour = keys_under(store, dataset10)
    later = datetime.now(timezone.utc) + 2 * MONTH

    report = prune_old_records(store, f"{dataset1}/", older_than="30d", now=later).to_json()
    assert (report["pruned"], report["unrecognised"], report["sample"]) == (1, 2, ["job-1"])
    assert records(store, dataset1) == {"notes.txt", "sub/job-9.success.json"}
    assert keys_under(store, dataset10) == neighbour, "out/dataset1 never covers out/dataset10"

    with pytest.raises(ValueError, match="wildcards"):
        prune_old_records(store, f"{root}/out/dataset1*", older_than="30d")
    with pytest.raises(ValueError, match="older_than: duration must not be negative"):
        prune_old_records(store, dataset1, older_than=-5)


def test_job_id_selects_one_job(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    commit(store, dest, "job-b")
    later = datetime.now(timezone.utc) + 2 * MONTH
    report = prune_old_records(store, dest, older_than="30d", now=later, job_id="job-b").to_json()
    assert (report["pruned"], report["job_id"], report["sample"]) == (1, "job-b", ["job-b"])
    assert records(store, dest) == {"job-a.outcome.json", "job-a.success.json"}


def test_records_written_since_the_listing_are_kept(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    commit(store, dest, "job-b")
    listing = find_job_records(store, dest, older_than="30d", now=datetime.now(timezone.utc) + 2 * MONTH)
    assert len(listing.stale) == 2
    mark_delivered(store, dest, "job-a")  # job-a's try is being marked delivered right now
    report = prune_records(store, listing, keep_outcomes=True)
    assert {o.job.job_id: o.status for o in report.outcomes} == {"job-a": "changed", "job-b": "pruned"}
    assert records(store, dest) == {"job-a.outcome.json", "job-a.success.json", "job-a.delivered.json"}


def test_an_unreadable_outcome_is_kept_and_named(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("table")
    outcome = JobLayout(dest, "job-bad").outcome
    store.write_bytes(outcome, b"{truncated")
    later = datetime.now(timezone.utc) + 2 * MONTH
    listing = find_job_records(store, dest, older_than="30d", now=later)
    (job,) = listing.jobs
    assert job.keep == "unreadable" and str(outcome) in (job.error or "")
    assert prune_records(store, listing).to_json()["kept_unreadable"] == 1
    assert records(store, dest) == {"job-bad.outcome.json"}


def test_an_interrupted_prune_never_leaves_a_job_looking_committing(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    faulty = FaultInjectingStore(store)
    record = str(JobLayout(dest, "job-a").job_record)
    faulty.inject(when=lambda call: call.op == "delete_files" and call.path == record, mode="crash")
    with pytest.raises(SimulatedCrash):
        prune_old_records(faulty, dest, older_than="30d", now=datetime.now(timezone.utc) + 2 * MONTH)
    assert records(store, dest) == {"job-a.success.json"}, "the outcome went first"
    assert inspect_job(store, dest, "job-a").state != JobState.COMMITTING, "nothing to roll forward"


@pytest.mark.parametrize("nested", [False, True])
def test_temp_tree_cleanup_never_treats_records_as_a_temp_tree(
    store_root: tuple[Store, StorePath], nested: bool
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    write_files(store, dest, ["_temporary/dead/00/f", "dt=2/_temporary/dead/f"])
    before = records(store, dest)
    report = clean_stale_temp_trees(store, dest, older_than="0s", nested=nested, keep_outcomes=True)
    assert report.to_json()["deleted"] == (2 if nested else 1)
    assert all(RECORDS_DIR not in str(o.tree.path) for o in report.outcomes)
    assert records(store, dest) == before
