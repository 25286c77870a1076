"""Cleanup never takes from a job past its commit point what rolling it forward needs.

A COMMITTING job (its outcome says commit, its driver died before the record) keeps its pending
uploads and its temporary tree however old they are; a dead job that never reached its commit
point beside it is still cleaned. Then the job is rolled forward and its output is complete.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from cleanup_support import keys_under
from support.committed_jobs import COMMITTER, interrupt_after_commit_point

from airflow_commit_provider.cleanup import (
    abort_pending_uploads,
    clean_stale_temp_trees,
    find_temp_trees,
    list_pending_uploads,
)
from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.job_control import JobState, finish_or_fence, inspect_job
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

LATER = timedelta(days=3)


def dead_before_its_commit_point(store: Store, dest: StorePath, job_id: str) -> None:
    """A job whose task committed (pending upload, manifest in its tree) and whose driver then died."""
    job = create_committer(COMMITTER, store, dest, job_id, CommitOptions(threads=1))
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    with attempt.create_file(f"dt=8/part-{job_id}.csv") as stream:
        stream.write(b"y")
    attempt.commit_task(rows=1)


def test_a_committing_job_keeps_its_uploads_and_tree(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("table")
    interrupt_after_commit_point(store, dest, "job-c")
    dead_before_its_commit_point(store, dest, "job-dead")
    later = datetime.now(timezone.utc) + LATER
    assert {u.path.relative_to(dest) for u in store.list_multipart_uploads(dest)} == {
        "dt=9/part-job-c.csv",
        "dt=8/part-job-dead.csv",
    }

    # The dead job is undecided: live for `max_job_duration` after its setup, taken as dead after.
    listing = list_pending_uploads(store, dest, older_than="1d", now=later, max_job_duration="2d")
    assert [u.path.relative_to(dest) for u in listing.uploads] == ["dt=8/part-job-dead.csv"]
    assert (listing.committing, listing.live) == (1, 0)
    report = abort_pending_uploads(store, dest, older_than="1d", now=later, max_job_duration="2d").to_json()
    assert (report["aborted"], report["committing"]) == (1, 1)
    assert [u.path.relative_to(dest) for u in store.list_multipart_uploads(dest)] == ["dt=9/part-job-c.csv"]

    trees = {tree.job_id: tree for tree in find_temp_trees(store, dest, older_than="1d", now=later).trees}
    assert (trees["job-dead"].stale, trees["job-dead"].live) == (False, True)  # within 7 days: live
    past_fence = find_temp_trees(store, dest, older_than="1d", now=later, max_job_duration="2d")
    trees = {tree.job_id: tree for tree in past_fence.trees}
    assert (trees["job-c"].stale, trees["job-c"].committing) == (False, True)
    assert (trees["job-dead"].stale, trees["job-dead"].committing, trees["job-dead"].live) == (
        True,
        False,
        False,
    )
    report = clean_stale_temp_trees(store, dest, older_than="1d", now=later, max_job_duration="2d").to_json()
    assert (report["deleted"], report["kept_committing"]) == (1, 1)
    assert not any("job-dead" in key for key in keys_under(store, dest)), "the dead job is gone"

    # What the cleanup left is what rolling forward needs: the job ends complete.
    assert finish_or_fence(store, dest, "job-c", COMMITTER).state == JobState.COMMITTED
    assert "dt=9/part-job-c.csv" in keys_under(store, dest)
    assert list(store.list_multipart_uploads(dest)) == []
    assert not find_temp_trees(store, dest, older_than="0s").count
    assert inspect_job(store, dest, "job-c").record is not None


def test_a_scope_above_the_destination_still_finds_the_job(store_root: tuple[Store, StorePath]) -> None:
    store, root = store_root
    dest = root.join("lake", "table")
    interrupt_after_commit_point(store, dest, "job-c")
    later = datetime.now(timezone.utc) + LATER
    for scope in (root.join("lake"), dest.join("dt=9")):
        listing = list_pending_uploads(store, scope, older_than="1d", now=later)
        assert (listing.count, listing.committing) == (0, 1), scope
    tree_report = clean_stale_temp_trees(store, root.join("lake"), older_than="1d", now=later, nested=True)
    assert tree_report.to_json()["kept_committing"] == 1
