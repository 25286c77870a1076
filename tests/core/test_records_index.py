"""The records index (`core.records_index`) and the list of commits read from it
(`commit_report.list_commit_page`), on both stores.

Jobs are run by the real committers; the tests with a thousand jobs clone one real job's records
under new job IDs and decision times (`devtools.cloned_jobs.clone_jobs`), each indexed as its driver
indexes it, so the listing they measure reads what the committers write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.committed_jobs import abort, commit, interrupt_after_commit_point
from support.faults import FaultInjectingStore

from airflow_commit_provider.cleanup import reindex_records
from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.job_control import JobState, finish_or_fence, inspect_job
from airflow_commit_provider.core.layout import RECORDS_DIR, RECORDS_INDEX_DIR, JobLayout, index_entry_name
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.records_index import INDEX_ENTRY_NAME, newest_jobs
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.devtools.cloned_jobs import clone_jobs
from airflow_commit_provider.report.commit_report import list_commit_page, list_commits

#: 2026-01-01T00:00:00Z in epoch ms: cloned jobs are decided a minute apart from here.
EPOCH = 1_767_225_600_000


def entries(store: Store, dest: StorePath) -> dict[str, bytes]:
    """The index entries under `dest`, by name."""
    index = dest.join(RECORDS_DIR, RECORDS_INDEX_DIR)
    return {status.path.name: store.read_bytes(status.path) for status in store.list_files(index)}


def stamped(store: Store, dest: StorePath) -> dict[str, tuple[bytes, object]]:
    """Each index entry's bytes and status (size, modification time): what a rewrite would change."""
    index = dest.join(RECORDS_DIR, RECORDS_INDEX_DIR)
    return {name: (data, store.get_status(index.join(name))) for name, data in entries(store, dest).items()}


def entry_of(store: Store, dest: StorePath, job_id: str) -> str:
    """The name the job's entry must have: its outcome's decision time, inverted."""
    outcome = inspect_job(store, dest, job_id).outcome
    assert outcome is not None, f"job {job_id} has no outcome"
    return index_entry_name(job_id, outcome.timestamp)


def test_each_decision_gets_one_entry_created_once_and_never_rewritten(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    watched = FaultInjectingStore(store)  # injects nothing: it records every call
    commit(watched, dest, "job-c")
    abort(watched, dest, "job-a")
    written = stamped(store, dest)
    assert set(written) == {entry_of(store, dest, "job-c"), entry_of(store, dest, "job-a")}
    for job_id, decision in (("job-c", "commit"), ("job-a", "abort")):
        body = json.loads(written[entry_of(store, dest, job_id)][0])
        outcome = inspect_job(store, dest, job_id).outcome
        assert outcome is not None
        assert body == {
            "name": INDEX_ENTRY_NAME,
            "jobId": job_id,
            "decision": decision,
            "committer": "partitioned",
            "decidedAt": outcome.timestamp,
        }

    # Whoever decides about a decided job again (an abort of a committed job, a fence of an aborted
    # one) follows the decision and finds its entry: nothing is written over it.
    assert create_committer("partitioned", watched, dest, "job-c").abort_job("late kill") is not None
    assert finish_or_fence(watched, dest, "job-a", "partitioned").state == JobState.ABORTED
    index_calls = [call for call in watched.calls if f"/{RECORDS_INDEX_DIR}/" in call.path]
    assert {call.op for call in index_calls if call.mutating} == {"write_bytes_if_absent"}
    assert len([call for call in index_calls if call.mutating]) == 4, "one per decision, one per follower"
    assert stamped(store, dest) == written


def test_a_driver_that_dies_between_its_outcome_and_its_entry_is_listed_and_indexed_later(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "job-1")
    interrupt_after_commit_point(store, dest, "job-2")  # dies at the entry's write, right after the outcome
    assert set(entries(store, dest)) == {entry_of(store, dest, "job-1")}

    page = list_commit_page(store, dest, limit=5)
    assert [(c.job_id, c.state) for c in page.commits] == [("job-1", "committed"), ("job-2", "committing")]
    assert page.after is None, "one page holds both: the job without an entry follows the index"

    # An Airflow retry settles the job: it follows the decision (rolls the commit forward) and
    # writes the missing entry, named by the outcome's time as the driver would have.
    assert finish_or_fence(store, dest, "job-2", "partitioned").state == JobState.COMMITTED
    assert set(entries(store, dest)) == {entry_of(store, dest, "job-1"), entry_of(store, dest, "job-2")}
    assert [c.job_id for c in list_commits(store, dest)] == ["job-2", "job-1"], "newest decision first"


def test_jobs_from_before_the_index_are_listed_after_it_and_reindex_puts_them_in_place(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    dest = root.join("table")
    commit(store, dest, "template")
    old = {f"old-{n}": EPOCH + n * 60_000 for n in range(3)}  # decided first, never indexed
    new = {f"new-{n}": EPOCH + (10 + n) * 60_000 for n in range(2)}
    clone_jobs(store, dest, "template", old, indexed=False)
    clone_jobs(store, dest, "template", new)
    store.delete(dest.join(RECORDS_DIR, RECORDS_INDEX_DIR, entry_of(store, dest, "template")))

    seen, after, pages = [], None, 0
    while True:
        page = list_commit_page(store, dest, limit=2, after=after)
        seen += [c.job_id for c in page.commits]
        pages += 1
        if page.after is None:
            break
        after = page.after
    assert seen[:2] == ["new-1", "new-0"], "the indexed jobs first, newest first"
    assert sorted(seen[2:]) == sorted([*old, "template"]) and len(seen) == 6, (
        "then every job without an entry, once"
    )
    assert pages == 3

    report = reindex_records(store, dest, dry_run=True)
    assert (sorted(report.indexed), report.present) == (sorted([*old, "template"]), 2)
    assert len(entries(store, dest)) == 2, "a dry run writes nothing"
    report = reindex_records(store, dest)
    assert (sorted(report.indexed), report.present, report.errors) == (sorted([*old, "template"]), 2, {})
    assert set(entries(store, dest)) == {entry_of(store, dest, job) for job in [*old, *new, "template"]}
    by_time = sorted([*old, *new], key=lambda job: -{**old, **new}[job])
    assert [c.job_id for c in list_commits(store, dest, limit=6)] == ["template", *by_time]
    assert reindex_records(store, dest).indexed == [], "nothing is written twice"


@contextmanager
def list_requests(store: S3Store) -> Iterator[list[dict[str, Any]]]:
    """The parameters of every ListObjectsV2 request the store's client sends meanwhile."""
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        seen.append(dict(params))

    events = store.client.meta.events
    events.register("provide-client-params.s3.ListObjectsV2", record)
    try:
        yield seen
    finally:
        events.unregister("provide-client-params.s3.ListObjectsV2", record)


@pytest.mark.s3
def test_a_page_of_commits_among_a_thousand_jobs_is_one_listing_of_at_most_n_keys(
    s3_store: S3Store, s3_bucket: str
) -> None:
    dest = StorePath("s3", s3_bucket, "table")
    commit(s3_store, dest, "template")
    decided = {f"job-{n:04d}": EPOCH + n * 60_000 for n in range(1_200)}
    clone_jobs(s3_store, dest, "template", decided)
    newest_first = ["template", *sorted(decided, key=lambda job: -decided[job])]

    before = s3_store.statistics.snapshot()
    with list_requests(s3_store) as requests:
        page = list_commit_page(s3_store, dest, limit=20)
    spent = s3_store.statistics.counters_since(before).counters
    assert [c.job_id for c in page.commits] == newest_first[:20]
    assert {c.state for c in page.commits} == {"committed"}
    assert spent.get("op_list") == 1 and len(requests) == 1, (
        "one listing request, whatever the number of jobs"
    )
    assert requests[0]["MaxKeys"] == 20 and requests[0]["Prefix"] == "table/_airflow_commit/_index/"
    assert spent.get("op_get", 0) + spent.get("op_head", 0) <= 1 + 20 * 3, (
        "the _SUCCESS, then a few reads per job"
    )

    # A later page is one listing too, of the keys after the cursor (the last entry shown).
    cursor = index_entry_name(newest_first[600], decided[newest_first[600]])
    with list_requests(s3_store) as requests:
        page = list_commit_page(s3_store, dest, limit=100, after=cursor)
    assert [c.job_id for c in page.commits] == newest_first[601:701]
    assert page.after == index_entry_name(newest_first[700], decided[newest_first[700]])
    assert len(requests) == 1 and requests[0]["MaxKeys"] == 100
    assert requests[0]["StartAfter"] == f"table/_airflow_commit/_index/{cursor}"
    # The last page exhausts the index, so it looks for jobs without an entry: none here.
    cursor = index_entry_name(newest_first[1150], decided[newest_first[1150]])
    last = list_commit_page(s3_store, dest, limit=100, after=cursor)
    assert ([c.job_id for c in last.commits], last.after) == (newest_first[1151:], None)


def test_the_tables_latest_commit_without_records_keeps_the_pages_whole(
    store_root: tuple[Store, StorePath],
) -> None:
    """A `_SUCCESS` naming a job with no records (Hadoop's, or pruned) is listed first on the first
    page and takes the last place of it: that job comes first on the next page, never skipped."""
    store, root = store_root
    dest = root.join("table")
    for job_id in ("job-1", "job-2", "job-3"):
        commit(store, dest, job_id)
    layout = JobLayout(dest, "job-3")
    entry = dest.join(RECORDS_DIR, RECORDS_INDEX_DIR, entry_of(store, dest, "job-3"))
    store.delete_files([layout.outcome, layout.job_record, entry])  # pruned; _SUCCESS still names it
    pages, after = [], None
    while True:
        page = list_commit_page(store, dest, limit=2, after=after)
        pages.append([c.job_id for c in page.commits])
        if page.after is None:
            break
        after = page.after
    assert pages == [["job-3", "job-2"], ["job-1"]]
    one = list_commit_page(store, dest, limit=1)
    assert ([c.job_id for c in one.commits], one.after) == (["job-3"], "")
    assert [c.job_id for c in list_commit_page(store, dest, limit=1, after="").commits] == ["job-2"]


@pytest.mark.parametrize("cursor", ["job-1", "0000000000000-job 1.json", "~x", "../0000000000000-a.json"])
def test_a_cursor_no_page_ends_with_is_refused_naming_it(tmp_path: Any, cursor: str) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    with pytest.raises(ValueError, match=r"^after: .* is not a cursor of a list of commits"):
        newest_jobs(LocalStore(), StorePath.parse(str(tmp_path)), 5, cursor)
    with pytest.raises(ValueError, match=r"^limit: a page lists at least 1 job, got 0$"):
        newest_jobs(LocalStore(), StorePath.parse(str(tmp_path)), 0)
