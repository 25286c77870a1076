"""Pruning job records from `<destination>/_airflow_commit/` by a policy (age, the newest kept),
on both stores.

Records are made by real committers (commit, abort, a commit interrupted after its commit point).
Ages are controlled without waiting: `now` is placed relative to the store's own modification
times, or (locally) the files' modification times are set back. A job's index entry
(`_index/<inverted time>-<job>.json`) is shown as `<job>.index.json`.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone

import pytest
from cleanup_support import keys_under, write_files
from support.committed_jobs import abort, commit, interrupt_after_commit_point
from support.faults import FaultInjectingStore, SimulatedCrash, StoreCall

from airflow_commit_provider.cleanup import (
    clean_stale_temp_trees,
    find_job_records,
    prune_old_records,
    prune_records,
)
from airflow_commit_provider.core.job_control import JobState, finish_or_fence, inspect_job, mark_delivered
from airflow_commit_provider.core.job_records import group_job_records
from airflow_commit_provider.core.layout import RECORDS_DIR, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

MONTH = timedelta(days=30)


def records(store: Store, dest: StorePath) -> set[str]:
    """The files in the records directory, an index entry shown as `<job>.index.json` and a job's
    file list (named by its checksum) as `<job>.lists`."""
    shown = (
        re.sub(r"^([^/]+)/files-[0-9a-f]{64}\.parquet$", r"\1.lists", key)
        for key in keys_under(store, dest.join(RECORDS_DIR))
    )
    return {re.sub(r"^_index/[0-9]{13}-(.+)\.json$", r"\1.index.json", key) for key in shown}


def newest(store: Store, dest: StorePath, job_id: str) -> datetime:
    """The newest modification time of the job's files, as the store reports it."""
    times = [
        s.modified for s in store.list_files(dest.join(RECORDS_DIR)) if s.path.name.startswith(f"{job_id}.")
    ]
    times += [
        s.modified for s in store.list_files(dest.join(RECORDS_DIR, "_index")) if f"-{job_id}." in s.path.name
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
    assert before == {
        "job-a.outcome.json",
        "job-a.index.json",
        "job-a.success.json",
        "job-a.delivered.json",
        "job-a.lists",
    }
    edge = newest(store, dest, "job-a") + MONTH  # datetimes are microseconds; local mtimes finer
    young = prune_old_records(store, dest, older_than="30d", now=edge - timedelta(milliseconds=1))
    assert (young.to_json()["kept_recent"], young.to_json()["pruned"]) == (1, 0)
    assert records(store, dest) == before, "a record a millisecond younger than the limit stays"
    edge += timedelta(milliseconds=1)

    dry = prune_old_records(store, dest, older_than="30d", now=edge, dry_run=True)
    assert dry.to_json()["would_prune"] == 1 and dry.to_json()["files"] == 5
    assert records(store, dest) == before, "a dry run changes nothing"

    pruned = prune_old_records(store, dest, older_than=MONTH, now=edge)
    report = pruned.to_json()
    assert (report["pruned"], report["files"], report["failed"], report["sample"]) == (1, 5, 0, ["job-a"])
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

    def set_age(job_id: str, kinds: set[str], age: timedelta) -> None:
        grouped, _ = group_job_records(store, dest.join(RECORDS_DIR))
        stamp = (real_now - age).timestamp()
        for kind, status in grouped[job_id]:
            if kind in kinds:
                os.utime(status.path.key, (stamp, stamp))

    set_age("job-old", {"outcome", "success", "index", "lists"}, timedelta(days=40))
    set_age("job-old-abort", {"outcome", "index"}, timedelta(days=31))
    set_age("job-mixed", {"outcome", "index"}, timedelta(days=40))  # its record is young: the job stays whole
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
        "job-mixed.index.json",
        "job-mixed.success.json",
        "job-mixed.lists",
        "job-new.outcome.json",
        "job-new.index.json",
        "job-new.success.json",
        "job-new.lists",
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
    # Its driver died right after the decision, before the index entry: the prune wrote it.
    assert report["indexed"] == 1
    assert records(store, dest) == {"job-c.outcome.json", "job-c.index.json", "job-c.lists"}, (
        "the decision stays; job-x went"
    )

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
    assert records(store, dest) == {
        "job-a.outcome.json",
        "job-a.index.json",
        "job-a.success.json",
        "job-a.lists",
    }


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
    assert records(store, dest) == {
        "job-a.outcome.json",
        "job-a.index.json",
        "job-a.success.json",
        "job-a.delivered.json",
        "job-a.lists",
    }


def test_an_unreadable_outcome_is_kept_and_named(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("table")
    outcome = JobLayout(dest, "job-bad").outcome
    store.write_bytes(outcome, b"{truncated")
    later = datetime.now(timezone.utc) + 2 * MONTH
    listing = find_job_records(store, dest, older_than="30d", now=later)
    (job,) = listing.jobs
    assert job.keep == "unreadable" and str(outcome) in (job.error or "")
    report = prune_records(store, listing).to_json()
    assert (report["kept_unreadable"], report["indexed"], report["index_failed"]) == (1, 0, 1)
    assert records(store, dest) == {"job-bad.outcome.json"}, "an unreadable decision is not indexed"


def test_an_interrupted_prune_never_leaves_a_job_looking_committing(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    mark_delivered(store, dest, "job-a")
    later = datetime.now(timezone.utc) + 2 * MONTH
    outcome = str(JobLayout(dest, "job-a").outcome)
    # The outcome goes alone, then the delivery marker and lists, then the record and index entry.
    for batch, left in (
        (
            ".delivered.json",
            {"job-a.success.json", "job-a.index.json", "job-a.delivered.json", "job-a.lists"},
        ),
        ("/_index/", {"job-a.success.json", "job-a.index.json"}),
    ):
        faulty = FaultInjectingStore(store)

        def nth_delete(call: StoreCall, batch: str = batch) -> bool:
            return call.op == "delete_files" and batch in call.path

        faulty.inject(when=nth_delete, mode="crash")
        with pytest.raises(SimulatedCrash):
            prune_old_records(faulty, dest, older_than="30d", now=later)
        assert records(store, dest) == left, "the outcome went first"
        assert inspect_job(store, dest, "job-a").state == JobState.UNKNOWN, "nothing to roll forward"
        assert outcome not in {str(s.path) for s in store.list_files(dest.join(RECORDS_DIR))}
    report = prune_old_records(store, dest, older_than="30d", now=later).to_json()
    assert (report["pruned"], report["sample"]) == (1, ["job-a"]), "the next prune finishes the job"
    assert records(store, dest) == set()


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


# The policy: a minimum age, the newest kept, never shorter than the longest job ------------------
def age_jobs(store: Store, dest: StorePath, ages: dict[str, timedelta], now: datetime) -> None:
    """Locally: set back the modification time of every file of each job to its age."""
    grouped, _ = group_job_records(store, dest.join(RECORDS_DIR))
    for job_id, age in ages.items():
        stamp = (now - age).timestamp()
        for _kind, status in grouped[job_id]:
            os.utime(status.path.key, (stamp, stamp))


def test_keep_newest_keeps_the_newest_of_the_old_jobs(tmp_path: os.PathLike[str]) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    store, dest = LocalStore(), StorePath.parse(f"{tmp_path}/table")
    ages = {"young": timedelta(days=2), **{f"old-{n}": timedelta(days=40 + n) for n in range(5)}}
    for job_id in ages:
        commit(store, dest, job_id)
    now = datetime.now(timezone.utc)
    age_jobs(store, dest, ages, now)

    listing = find_job_records(store, dest, older_than="30d", keep_newest=2, now=now)
    assert {job.job_id: job.keep for job in listing.jobs} == {
        "young": "recent",
        "old-0": "newest",
        "old-1": "newest",
        "old-2": None,
        "old-3": None,
        "old-4": None,
    }
    # One job selected: still ranked among all, so one of the newest stays.
    assert (
        prune_old_records(store, dest, older_than="30d", keep_newest=2, job_id="old-1", now=now).acted_count
        == 0
    )
    report = prune_records(store, listing).to_json()
    assert (report["pruned"], report["kept_newest"], report["kept_recent"], report["keep_newest"]) == (
        3,
        2,
        1,
        2,
    )
    assert {name.split(".")[0] for name in records(store, dest)} == {"young", "old-0", "old-1"}
    again = prune_old_records(store, dest, older_than="30d", keep_newest=2, now=now).to_json()
    assert (again["pruned"], again["kept_newest"]) == (0, 2), "the kept stay kept: the policy is stable"


def test_an_abort_outcome_younger_than_the_longest_job_is_never_pruned(tmp_path: os.PathLike[str]) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    store, dest = LocalStore(), StorePath.parse(f"{tmp_path}/table")
    abort(store, dest, "fenced")  # its driver may still be running, orphaned
    commit(store, dest, "done")
    now = datetime.now(timezone.utc)
    age_jobs(store, dest, {"fenced": timedelta(days=6), "done": timedelta(days=6)}, now)

    with pytest.raises(ValueError) as refused:
        find_job_records(store, dest, older_than="1d", now=now)  # the default longest job is 7 days
    assert str(refused.value).startswith("older_than: 1d is shorter than max_job_duration 7d: ")
    assert "\n" not in str(refused.value) and "orphaned driver" in str(refused.value)
    with pytest.raises(ValueError, match=r"^older_than: 2d is shorter than max_job_duration 3d: "):
        prune_old_records(store, dest, older_than="2d", max_job_duration="3d", now=now)
    with pytest.raises(ValueError, match=r"^keep_newest: expected a number of jobs \(0 or more\), got -1$"):
        prune_old_records(store, dest, keep_newest=-1, now=now)
    assert inspect_job(store, dest, "fenced").state == JobState.ABORTED, "nothing was touched"

    kept = prune_old_records(store, dest, older_than="7d", now=now).to_json()
    assert (kept["pruned"], kept["kept_recent"]) == (0, 2), "six days old: younger than the longest job"
    assert inspect_job(store, dest, "fenced").state == JobState.ABORTED, "its outcome still fences the driver"
    # A user who vouches that jobs end within a day may prune it: it fences no driver any more.
    pruned = prune_old_records(store, dest, older_than="1d", max_job_duration="1d", now=now).to_json()
    assert (pruned["pruned"], pruned["max_job_duration_seconds"]) == (2, 86400)
    assert inspect_job(store, dest, "fenced").state == JobState.UNKNOWN


def test_a_pruned_job_loses_every_file_including_its_lists_folder(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-a")
    mark_delivered(store, dest, "job-a")
    lists = [
        f"{RECORDS_DIR}/job-a/files-{'0' * 64}.parquet",
        f"{RECORDS_DIR}/job-a/partitions-{'1' * 64}.parquet",
    ]
    # The lists of a job that is still running (no records yet), and of a job whose name extends job-a's.
    others = [
        f"{RECORDS_DIR}/job-live/files-{'2' * 64}.parquet",
        f"{RECORDS_DIR}/job-a1/files-{'3' * 64}.parquet",
    ]
    write_files(store, dest, [*lists, *others])

    listing = find_job_records(store, dest, older_than="30d", now=datetime.now(timezone.utc) + 2 * MONTH)
    (job,) = listing.jobs
    assert (job.job_id, job.kinds, len(job.files)) == (
        "job-a",
        ("delivered", "index", "lists", "outcome", "success"),
        7,
    ), "its outcome, record, marker, entry, its own file list and the two lists written here"
    assert listing.unrecognised == 2, "the folders of jobs with no records are no job's: left alone"
    report = prune_records(store, listing).to_json()
    assert (report["pruned"], report["files"]) == (1, 7)
    assert keys_under(store, dest.join(RECORDS_DIR)) == {
        other.removeprefix(f"{RECORDS_DIR}/") for other in others
    }
    assert not any(key.startswith("job-a/") for key in keys_under(store, dest.join(RECORDS_DIR)))
    assert inspect_job(store, dest, "job-a").state == JobState.UNKNOWN
