"""Stale temporary trees, on both stores (`store_root` runs each test on file:// and on the embedded S3)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

import pytest
from cleanup_support import LosesFirstAbort, NeverAborts, keys_under, start_upload, write_files

from airflow_commit_provider.cleanup import (
    ScopeError,
    clean_stale_temp_trees,
    clean_temp_trees,
    find_temp_trees,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store

DATA = ["data/day=1/part-00000.parquet", "_SUCCESS", "data/_temporary.txt", "notes/__magic_job-x.md"]
TREES = {
    "_temporary/job-a": ["_temporary/job-a/00/tasks/attempt_1/part-0", "_temporary/job-a/job.json"],
    "__magic_job-b": ["__magic_job-b/job-b/00/tasks/t/__base/part-1.pending"],
    ".spark-staging-c": [".spark-staging-c/day=2/part-2.parquet"],
    "__magic/job-d": ["__magic/job-d/tasks/attempt_2/__base/x.pending"],
}
NESTED = ["db/events/_temporary/job-e/00/f"]
NEIGHBOUR = ["_temporary/job-f/00/f", ".spark-staging-g/f"]  # in table10, next to table1

Root = tuple[Store, StorePath]
#: The trees here are left by jobs that died (job-a's holds a job marker, written as the test
#: starts): the cleanups that look later look past the fence after which such a job is not live.
DEAD = {"max_job_duration": "1h"}


@pytest.fixture
def table(store_root: Root) -> Root:
    store, root = store_root
    table = root.join("warehouse/table1")
    write_files(store, table, DATA + [f for files in TREES.values() for f in files] + NESTED)
    write_files(store, root.join("warehouse/table10"), NEIGHBOUR)
    return store, table


def _later(days: float = 2) -> datetime:
    return datetime.now(timezone.utc) + timedelta(days=days)


def test_finds_each_kind_of_tree_with_its_job(table: Root) -> None:
    store, root = table
    listing = find_temp_trees(store, root, older_than="1d", now=_later(), **DEAD)
    found = {tree.path.relative_to(root): tree for tree in listing.trees}
    assert set(found) == set(TREES)
    assert {k: (t.kind, t.job_id, t.files, t.stale) for k, t in found.items()} == {
        "_temporary/job-a": ("temporary", "job-a", 2, True),
        "__magic_job-b": ("magic-job", "b", 1, True),
        ".spark-staging-c": ("spark-staging", "c", 1, True),
        "__magic/job-d": ("magic", "d", 1, True),
    }
    assert found["_temporary/job-a"].bytes == 20
    # Within the fence (7 days by default) job-a, set up and undecided, is live: its tree is kept.
    within = {
        t.path.relative_to(root): t for t in find_temp_trees(store, root, older_than="1d", now=_later()).trees
    }
    assert (within["_temporary/job-a"].stale, within["_temporary/job-a"].live) == (False, True)
    assert sum(t.stale for t in within.values()) == len(TREES) - 1
    nested = find_temp_trees(store, root, older_than="1d", now=_later(), nested=True, **DEAD)
    assert {t.path.relative_to(root) for t in nested.trees} == {*TREES, "db/events/_temporary/job-e"}
    only_c = find_temp_trees(store, root, older_than="1d", now=_later(), job_id="c")
    assert [t.path.name for t in only_c.trees] == [".spark-staging-c"] and only_c.other_jobs == 3


def test_staleness_is_the_age_of_the_newest_write(table: Root) -> None:
    store, root = table
    listing = find_temp_trees(store, root)  # real clock, default 24 h: everything was just written
    assert listing.count and listing.stale_count == 0
    newest = max(t.newest or 0 for t in listing.trees)
    oldest = min(t.newest or 0 for t in listing.trees)
    at = datetime.fromtimestamp(oldest, tz=timezone.utc) + timedelta(hours=1) - timedelta(seconds=1)
    assert find_temp_trees(store, root, older_than="1h", now=at).stale_count == 0
    at = datetime.fromtimestamp(newest, tz=timezone.utc) + timedelta(hours=1, seconds=1)  # datetime: only µs
    assert find_temp_trees(store, root, older_than="1h", now=at, **DEAD).stale_count == len(TREES)


def test_clean_deletes_only_stale_trees_and_nothing_else(table: Root, store_root: Root) -> None:
    store, root = table
    outside = store_root[1].join("warehouse/table10")
    report = clean_stale_temp_trees(store, root, older_than="1d", now=_later(), **DEAD)
    summary = report.to_json()
    assert (summary["deleted"], summary["files"], summary["failed"]) == (4, 5, 0)
    assert summary["bytes"] == 50
    assert keys_under(store, root) == set(DATA + NESTED)
    assert keys_under(store, outside) == set(NEIGHBOUR)
    if root.is_local:  # emptied containers do not linger
        assert not os.path.exists(root.join("_temporary").key)


def test_dry_run_changes_nothing(table: Root) -> None:
    store, root = table
    before = {(s.path, s.size, s.modified) for s in store.list_files(root)}
    report = clean_stale_temp_trees(store, root, older_than="1d", now=_later(), dry_run=True, **DEAD)
    assert report.to_json()["would_delete"] == 4 and report.to_json()["deleted"] == 0
    assert report.bytes_reclaimed == 50
    assert {(s.path, s.size, s.modified) for s in store.list_files(root)} == before


def test_a_tree_written_to_during_the_cleanup_survives(table: Root) -> None:
    """The live job writes between the listing and the delete: its tree is left alone."""
    store, root = table
    listing = find_temp_trees(store, root, older_than="1d", now=_later(), **DEAD)
    assert listing.stale_count == 4
    store.write_bytes(root.join("_temporary/job-a/00/tasks/attempt_1/part-9"), b"new")  # the live job
    store.delete_tree(root.join(".spark-staging-c"))  # someone else cleaned this one
    report = clean_temp_trees(store, listing, keep_outcomes=True)
    status = {o.tree.path.relative_to(root): o.status for o in report.outcomes}
    assert status == {
        "_temporary/job-a": "active",
        "__magic_job-b": "deleted",
        ".spark-staging-c": "vanished",
        "__magic/job-d": "deleted",
    }
    assert "_temporary/job-a/00/tasks/attempt_1/part-9" in keys_under(store, root)
    assert "_temporary/job-a/job.json" in keys_under(store, root)


def test_pending_uploads_keep_a_tree_alive_and_are_aborted_with_it(table: Root) -> None:
    store, root = table
    upload = root.join("__magic_job-b/job-b/00/tasks/t/__base/big.parquet")
    upload_id = start_upload(store, upload, parts=2, size=100)
    (tree,) = find_temp_trees(store, root, older_than="1d", now=_later(), job_id="b").trees
    assert tree.uploads == 1 and tree.newest is not None
    report = clean_stale_temp_trees(store, root, older_than="1d", now=_later(), job_id="b")
    assert report.to_json()["uploads_aborted"] == 1
    assert all(u.upload_id != upload_id for u in store.list_multipart_uploads(root))
    assert not any(k.startswith("__magic_job-b") for k in keys_under(store, root))


MAGIC_UPLOAD = "__magic_job-b/job-b/00/tasks/t/__base/big.parquet"


def test_a_lost_abort_of_a_tree_upload_is_repeated(table: Root) -> None:
    """The tree is listed again after its uploads are aborted; one still pending is aborted again."""
    store, root = table
    upload_id = start_upload(store, root.join(MAGIC_UPLOAD), size=10)
    losing = LosesFirstAbort(store, {})
    report = clean_stale_temp_trees(losing, root, older_than="1d", now=_later(), job_id="b")
    assert (report.to_json()["deleted"], report.to_json()["uploads_aborted"]) == (1, 1)
    assert losing.calls[f"abort:{upload_id}"] == 2
    assert all(u.upload_id != upload_id for u in store.list_multipart_uploads(root))
    assert not any(k.startswith("__magic_job-b") for k in keys_under(store, root))


def test_a_tree_whose_upload_stays_pending_is_not_deleted(table: Root) -> None:
    store, root = table
    upload_id = start_upload(store, root.join(MAGIC_UPLOAD), size=10)
    stuck = NeverAborts(store, upload_id)
    report = clean_stale_temp_trees(
        stuck, root, older_than="1d", now=_later(), job_id="b", keep_outcomes=True
    )
    (outcome,) = report.outcomes
    assert outcome.status == "failed" and "still pending after 4 aborts" in (outcome.error or "")
    assert MAGIC_UPLOAD in (outcome.error or "") and stuck.calls[f"abort:{upload_id}"] == 4
    assert "__magic_job-b/job-b/00/tasks/t/__base/part-1.pending" in keys_under(store, root)
    assert any(u.upload_id == upload_id for u in store.list_multipart_uploads(root))


def test_loose_files_in_a_container_are_their_own_tree(table: Root) -> None:
    store, root = table
    write_files(store, root, ["_temporary/stray.bin"])
    listing = find_temp_trees(store, root, older_than="1d", now=_later(), job_id=None, **DEAD)
    loose = [t for t in listing.trees if t.loose]
    assert [(t.path.relative_to(root), t.files, t.job_id) for t in loose] == [("_temporary", 1, None)]
    report = clean_temp_trees(store, listing)
    assert report.to_json()["deleted"] == 5
    assert keys_under(store, root) == set(DATA + NESTED)


def test_scope_checks(store_root: Root) -> None:
    store, root = store_root
    if root.is_local:
        with pytest.raises(ScopeError, match="whole filesystem"):
            find_temp_trees(store, "file:///")
    else:
        with pytest.raises(ScopeError, match="allow_bucket_root"):
            find_temp_trees(store, f"s3://{root.bucket}/")
        write_files(store, StorePath("s3", root.bucket, ""), ["_temporary/j/f"])
        listing = find_temp_trees(store, f"s3://{root.bucket}/", allow_bucket_root=True, now=_later(), **DEAD)
        assert [t.path.key for t in listing.stale()] == ["_temporary/j"]


def test_local_age_by_real_mtimes(local_root: StorePath) -> None:
    """file:// lets a test age files for real: a stale tree goes, a live job's tree stays."""
    from airflow_commit_provider.core.store.local import LocalStore

    store = LocalStore()
    write_files(
        store, local_root, ["_temporary/dead/00/f", "_temporary/live/00/f", "_temporary/live/job.json"]
    )
    two_days_ago = time.time() - 2 * 86400
    for name in ("_temporary/dead/00/f", "_temporary/live/00/f"):
        os.utime(local_root.join(name).key, (two_days_ago, two_days_ago))
    os.makedirs(local_root.join(".spark-staging-empty").key)  # an empty tree, dated by its directory
    os.utime(local_root.join(".spark-staging-empty").key, (two_days_ago, two_days_ago))
    report = clean_stale_temp_trees(store, local_root, keep_outcomes=True)  # real clock, default 24 h
    assert sorted(str(o.tree.path.relative_to(local_root)) for o in report.outcomes) == [
        ".spark-staging-empty",
        "_temporary/dead",
    ]
    assert keys_under(store, local_root) == {"_temporary/live/00/f", "_temporary/live/job.json"}
    assert not os.path.exists(local_root.join(".spark-staging-empty").key)
