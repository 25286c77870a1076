"""Pending-upload cleanup against the embedded S3 (SeaweedFS): real Initiated times, real races."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from cleanup_support import HookedStore, LosesFirstAbort, NeverAborts, is_pending, start_upload

from airflow_commit_provider.cleanup import (
    ScopeError,
    abort_pending_uploads,
    abort_uploads,
    list_pending_uploads,
)
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import NoSuchUploadError, StoreError
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

pytestmark = pytest.mark.s3

ALL = "0s"  # every upload is old enough


def _root(bucket: str, key: str) -> StorePath:
    return StorePath("s3", bucket, key)


def test_dataset1_never_matches_dataset10(s3_store: S3Store, s3_bucket: str) -> None:
    out = _root(s3_bucket, "out")
    mine = {
        start_upload(s3_store, out.join("dataset1/part-0")): "dataset1/part-0",
        start_upload(s3_store, out.join("dataset1/sub/part-1")): "dataset1/sub/part-1",
    }
    neighbours = {
        out.join("dataset10/part-0"): start_upload(s3_store, out.join("dataset10/part-0")),
        out.join("dataset11/work/part-0"): start_upload(s3_store, out.join("dataset11/work/part-0")),
        out.join("dataset1.bak/part-0"): start_upload(s3_store, out.join("dataset1.bak/part-0")),
    }
    # The server matches prefixes as plain strings: the test would prove nothing otherwise.
    raw = s3_store.client.list_multipart_uploads(Bucket=s3_bucket, Prefix="out/dataset1")["Uploads"]
    assert {u["Key"] for u in raw} >= {"out/dataset10/part-0", "out/dataset11/work/part-0"}

    for scope in ("s3://{b}/out/dataset1", "s3://{b}/out/dataset1/", "s3a://{b}/out/dataset1"):
        listing = list_pending_uploads(s3_store, scope.format(b=s3_bucket), older_than=ALL)
        assert {u.upload_id for u in listing.uploads} == set(mine)

    report = abort_pending_uploads(s3_store, f"s3://{s3_bucket}/out/dataset1", older_than=ALL, retry_delay=0)
    assert report.aborted == 2
    for path, upload_id in neighbours.items():
        assert is_pending(s3_store, path, upload_id)
    # The neighbour's upload is intact: it still completes.
    path = out.join("dataset10/part-0")
    etag = s3_store.list_parts(path, neighbours[path])[0].etag
    s3_store.complete_multipart_upload(path, neighbours[path], [etag])
    assert s3_store.get_status(path) is not None


def test_age_filter_uses_real_initiated_times(s3_store: S3Store, s3_bucket: str) -> None:
    table = _root(s3_bucket, "warehouse/t")
    ids = {start_upload(s3_store, table.join(f"part-{i}"), parts=2, size=300) for i in range(3)}
    initiated = [u.initiated for u in s3_store.list_multipart_uploads(table)]
    assert abs(max(initiated) - time.time()) < 600, "SeaweedFS reports real Initiated times"
    oldest = datetime.fromtimestamp(min(initiated), tz=timezone.utc)
    newest = datetime.fromtimestamp(max(initiated), tz=timezone.utc)

    # Real clock, default 24 h: all are too young.
    listing = list_pending_uploads(s3_store, table)
    assert (listing.count, listing.too_recent) == (0, 3)
    # Six hours after the newest was initiated, all are at least 6 h old ...
    listing = list_pending_uploads(s3_store, table, older_than="6h", now=newest + timedelta(hours=6))
    assert {u.upload_id for u in listing.uploads} == ids
    assert all(u.age_seconds >= 6 * 3600 for u in listing.uploads)
    assert (listing.total_bytes, listing.total_parts) == (3 * 600, 6)
    # ... one second before the oldest turns 6 h, none is.
    early = oldest + timedelta(hours=6) - timedelta(seconds=1)
    listing = list_pending_uploads(s3_store, table, older_than="6h", now=early)
    assert (listing.count, listing.too_recent) == (0, 3)
    # Aborting with the same clock leaves them all.
    report = abort_pending_uploads(s3_store, table, older_than="6h", now=early)
    assert report.aborted == 0 and len(list(s3_store.list_multipart_uploads(table))) == 3


def test_dry_run_changes_nothing(s3_store: S3Store, s3_bucket: str) -> None:
    table = _root(s3_bucket, "t")
    ids = {start_upload(s3_store, table.join(f"p={i}/f"), parts=3, size=100) for i in range(4)}
    before = {(u.upload_id, u.initiated) for u in s3_store.list_multipart_uploads(table)}
    report = abort_pending_uploads(s3_store, table, older_than=ALL, dry_run=True)
    summary = report.to_json()
    assert (summary["would_abort"], summary["aborted"], summary["bytes"], summary["parts"]) == (
        4,
        0,
        1200,
        12,
    )
    assert sorted(summary["sample"]) == sorted(f"t/p={i}/f" for i in range(4))
    assert {(u.upload_id, u.initiated) for u in s3_store.list_multipart_uploads(table)} == before
    for upload_id in ids:
        path = next(u.path for u in s3_store.list_multipart_uploads(table) if u.upload_id == upload_id)
        assert len(s3_store.list_parts(path, upload_id)) == 3


def test_uploads_that_vanish_meanwhile_are_counted_not_errors(s3_store: S3Store, s3_bucket: str) -> None:
    """SeaweedFS answers 204 to aborting a gone upload, so only the listing-time vanish shows."""
    table = _root(s3_bucket, "t")
    paths = [table.join(f"part-{i}") for i in range(6)]
    ids = [start_upload(s3_store, path) for path in paths]
    completed, aborted_by_other, gone_before_measure = ids[0], ids[1], ids[2]

    def other_party(path: StorePath, upload_id: str) -> None:
        """Someone else completes or aborts the upload between our listing and our abort."""
        if upload_id == completed:
            etag = s3_store.list_parts(path, upload_id)[0].etag
            s3_store.complete_multipart_upload(path, upload_id, [etag])
        elif upload_id == aborted_by_other:
            s3_store.abort_multipart_upload(path, upload_id)

    def vanish_early(path: StorePath, upload_id: str) -> None:
        if upload_id == gone_before_measure and racing.calls[f"list_parts:{upload_id}"] == 1:
            s3_store.abort_multipart_upload(path, upload_id)

    racing = HookedStore(s3_store, {"abort": other_party, "list_parts": vanish_early})
    report = abort_pending_uploads(racing, table, older_than=ALL, sizes=True, retry_delay=0)
    summary = report.to_json()
    assert (summary["aborted"], summary["vanished"], summary["failed"]) == (5, 1, 0)
    assert report.listing.vanished == 1  # vanished while being measured
    assert s3_store.get_status(paths[0]) is not None  # the completed one is a real object now
    assert list(s3_store.list_multipart_uploads(table)) == []


class AnswersNoSuchUpload(HookedStore):
    """Aborting an upload that is gone answers NoSuchUpload, as on AWS (404), not 204."""

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self._hook("abort", path, upload_id)
        if not is_pending(self.inner, path, upload_id):
            raise NoSuchUploadError(f"S3 AbortMultipartUpload {path} failed: NoSuchUpload (HTTP 404)")
        self.inner.abort_multipart_upload(path, upload_id)


def test_no_such_upload_from_the_abort_counts_as_vanished(s3_store: S3Store, s3_bucket: str) -> None:
    table = _root(s3_bucket, "t")
    paths = [table.join(f"part-{i}") for i in range(4)]
    completed, aborted_by_other, *mine = [start_upload(s3_store, path) for path in paths]

    def other_party(path: StorePath, upload_id: str) -> None:
        if upload_id == completed:
            s3_store.complete_multipart_upload(
                path, upload_id, [s3_store.list_parts(path, upload_id)[0].etag]
            )
        elif upload_id == aborted_by_other:
            s3_store.abort_multipart_upload(path, upload_id)

    report = abort_pending_uploads(
        AnswersNoSuchUpload(s3_store, {"abort": other_party}),
        table,
        older_than=ALL,
        retry_delay=0,
        keep_outcomes=True,
    )
    status = {o.upload.upload_id: o.status for o in report.outcomes}
    assert status == {completed: "vanished", aborted_by_other: "vanished", **dict.fromkeys(mine, "aborted")}
    summary = report.to_json()
    assert (summary["aborted"], summary["vanished"], summary["failed"]) == (2, 2, 0)
    assert s3_store.get_status(paths[0]) is not None
    assert list(s3_store.list_multipart_uploads(table)) == []


def test_abort_is_repeated_while_the_upload_is_still_listed(s3_store: S3Store, s3_bucket: str) -> None:
    """S3: parts still arriving can survive an abort; the re-listing finds it and we abort again."""
    table = _root(s3_bucket, "t")
    upload_id = start_upload(s3_store, table.join("f"), parts=2)
    report = abort_pending_uploads(
        LosesFirstAbort(s3_store, {}), table, older_than=ALL, retry_delay=0, keep_outcomes=True
    )
    (outcome,) = report.outcomes
    assert (outcome.status, outcome.repeats, outcome.attempts) == ("aborted", 1, 2)
    assert report.to_json()["repeated_aborts"] == 1
    assert not is_pending(s3_store, table.join("f"), upload_id)


def test_an_upload_still_pending_after_every_round_is_reported_failed(
    s3_store: S3Store, s3_bucket: str
) -> None:
    table = _root(s3_bucket, "t")
    stuck, *others = (start_upload(s3_store, table.join(f"f{i}")) for i in range(4))
    store = NeverAborts(s3_store, stuck)
    report = abort_pending_uploads(
        store, table, older_than=ALL, retry_delay=0, verify_rounds=2, keep_outcomes=True
    )
    by_id = {o.upload.upload_id: o for o in report.outcomes}
    assert (by_id[stuck].status, by_id[stuck].repeats) == ("failed", 2)
    assert by_id[stuck].error == "still pending after 3 aborts"
    assert store.calls[f"abort:{stuck}"] == 3
    assert all((by_id[i].status, by_id[i].repeats) == ("aborted", 0) for i in others)
    summary = report.to_json()
    assert (summary["aborted"], summary["failed"], summary["repeated_aborts"]) == (3, 1, 2)
    assert summary["failures"] == [
        {"key": "t/f0", "upload_id": stuck, "error": "still pending after 3 aborts"}
    ]
    assert [u.upload_id for u in s3_store.list_multipart_uploads(table)] == [stuck]


def _requests(store: S3Store, before: dict[str, int]) -> dict[str, int]:
    after = store.statistics.snapshot()
    ops = ("op_multipart_list", "op_list_parts", "op_multipart_abort")
    return {op: after.get(op, 0) - before.get(op, 0) for op in ops}


@pytest.mark.parametrize(("sizes", "list_parts"), [(None, 0), (True, 5)])
def test_an_abort_sends_one_request_per_upload_plus_listings(
    s3_store: S3Store, s3_bucket: str, sizes: bool | None, list_parts: int
) -> None:
    """List, abort each once, list again to verify; measuring sizes adds one ListParts each."""
    table = _root(s3_bucket, "t")
    for i in range(5):
        start_upload(s3_store, table.join(f"f{i}"))
    before = s3_store.statistics.snapshot()
    report = abort_pending_uploads(s3_store, table, older_than=ALL, sizes=sizes)
    assert report.aborted == 5
    assert _requests(s3_store, before) == {
        "op_multipart_list": 2,
        "op_list_parts": list_parts,
        "op_multipart_abort": 5,
    }


def test_sizes_are_measured_for_listings_and_dry_runs_not_for_aborts(
    s3_store: S3Store, s3_bucket: str
) -> None:
    tables = {name: _root(s3_bucket, name) for name in ("listed", "dry", "abort", "sized")}
    for table in tables.values():
        for i in range(2):
            start_upload(s3_store, table.join(f"f{i}"), parts=2, size=100)

    listing = list_pending_uploads(s3_store, tables["listed"], older_than=ALL)
    assert (listing.sizes_measured, listing.total_bytes, listing.total_parts) == (True, 400, 4)
    dry = abort_pending_uploads(s3_store, tables["dry"], older_than=ALL, dry_run=True).to_json()
    assert (dry["sizes_measured"], dry["bytes"], dry["parts"]) == (True, 400, 4)

    report = abort_pending_uploads(s3_store, tables["abort"], older_than=ALL, keep_outcomes=True)
    summary = report.to_json()
    assert (summary["aborted"], summary["sizes_measured"], summary["bytes"], summary["parts"]) == (
        2,
        False,
        None,
        None,
    )
    assert report.bytes_reclaimed is None and report.listing.total_bytes is None
    assert {(o.upload.bytes, o.upload.parts) for o in report.outcomes} == {(None, None)}

    sized = abort_pending_uploads(s3_store, tables["sized"], older_than=ALL, sizes=True).to_json()
    assert (sized["aborted"], sized["sizes_measured"], sized["bytes"], sized["parts"]) == (2, True, 400, 4)
    unsized = abort_pending_uploads(s3_store, tables["listed"], older_than=ALL, dry_run=True, sizes=False)
    assert unsized.to_json()["bytes"] is None and unsized.to_json()["would_abort"] == 2


def test_transient_errors_are_retried_and_persistent_ones_reported(s3_store: S3Store, s3_bucket: str) -> None:
    table = _root(s3_bucket, "t")
    flaky, broken, fine = (start_upload(s3_store, table.join(name)) for name in ("flaky", "broken", "fine"))
    failures = {"flaky": 0}

    def fail(path: StorePath, upload_id: str) -> None:
        if upload_id == broken:
            raise StoreError(f"S3 AbortMultipartUpload {path} failed: InternalError (HTTP 500)")
        if upload_id == flaky and failures["flaky"] == 0:
            failures["flaky"] += 1
            raise StoreError("connection reset")

    report = abort_pending_uploads(
        HookedStore(s3_store, {"abort": fail}), table, older_than=ALL, retry_delay=0, keep_outcomes=True
    )
    by_id = {o.upload.upload_id: o for o in report.outcomes}
    assert (by_id[flaky].status, by_id[flaky].attempts) == ("aborted", 2)
    assert (by_id[broken].attempts, by_id[broken].repeats) == (3, 0)
    assert by_id[fine].status == "aborted"
    assert by_id[broken].status == "failed" and "InternalError" in (by_id[broken].error or "")
    assert report.to_json()["failures"][0]["key"] == "t/broken"
    assert is_pending(s3_store, table.join("broken"), broken)


def test_bucket_root_scope_requires_the_opt_in(s3_store: S3Store, s3_bucket: str) -> None:
    start_upload(s3_store, _root(s3_bucket, "at-root"))
    start_upload(s3_store, _root(s3_bucket, "deep/down/x"))
    for scope in (f"s3://{s3_bucket}", f"s3://{s3_bucket}/", _root(s3_bucket, "")):
        with pytest.raises(ScopeError, match="allow_bucket_root"):
            list_pending_uploads(s3_store, scope, older_than=ALL)
        with pytest.raises(ScopeError):
            abort_pending_uploads(s3_store, scope, older_than=ALL)
    assert len(list(s3_store.list_multipart_uploads(_root(s3_bucket, "")))) == 2
    listing = list_pending_uploads(s3_store, f"s3://{s3_bucket}", older_than=ALL, allow_bucket_root=True)
    assert {u.path.key for u in listing.uploads} == {"at-root", "deep/down/x"}


def test_job_id_filter_uses_keys_and_the_jobs_upload_records(s3_store: S3Store, s3_bucket: str) -> None:
    table = _root(s3_bucket, "warehouse/events")
    job, other = "7f1c0e3a-0000-4000-8000-000000000001", "7f1c0e3a-0000-4000-8000-000000000002"
    named = start_upload(s3_store, table.join(f"day=1/part-00000-{job}-c000.parquet"))
    recorded_path = table.join("day=2/renamed.parquet")
    recorded = start_upload(s3_store, recorded_path)
    records = JobLayout(table, job, magic=True).upload_records_dir("attempt_x_m_000000_0").join("a.json")
    s3_store.write_bytes(records, f'[{{"uri": "{recorded_path.uri()}", "uploadId": "{recorded}"}}]'.encode())
    start_upload(s3_store, table.join(f"day=1/part-00001-{other}-c000.parquet"))
    start_upload(s3_store, table.join("day=3/unrecorded.parquet"))

    listing = list_pending_uploads(s3_store, table, older_than=ALL, job_id=job)
    assert {u.upload_id for u in listing.uploads} == {named, recorded}
    assert listing.other_jobs == 2
    # Records above a partition-level scope are found too.
    listing = list_pending_uploads(s3_store, table.join("day=2"), older_than=ALL, job_id=job)
    assert [u.upload_id for u in listing.uploads] == [recorded]
    with pytest.raises(ValueError, match="job_id"):
        list_pending_uploads(s3_store, table, job_id="../x")


#: Uploads per ListMultipartUploads page. AWS's pages hold 1,000; following the markers from page
#: to page is the same at any size, so a small page needs 250 uploads, not 1,050, for three pages.
PAGE = 100
PAGED_UPLOADS = 2 * PAGE + PAGE // 2


def _aws_paged_store(embedded_s3: EmbeddedS3) -> S3Store:
    """An S3Store whose ListMultipartUploads pages hold at most `PAGE` uploads, as AWS's hold 1,000.

    SeaweedFS's default page is larger, so without the cap no second page would ever be read.
    """
    client = embedded_s3.client(max_pool_connections=40)

    def cap(params: dict[str, Any], **_: Any) -> None:
        params.setdefault("MaxUploads", PAGE)

    client.meta.events.register("provide-client-params.s3.ListMultipartUploads", cap)
    return S3Store(client=client)


@pytest.mark.slow
def test_pagination_over_several_pages_of_uploads(embedded_s3: EmbeddedS3, s3_bucket: str) -> None:
    s3_store = _aws_paged_store(embedded_s3)
    table = _root(s3_bucket, "big/table")
    neighbour = start_upload(s3_store, _root(s3_bucket, "big/table10/part-0"))
    paths = [table.join(f"part={i % 7}/file-{i:05d}") for i in range(PAGED_UPLOADS)]
    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        created = set(pool.map(s3_store.create_multipart_upload, paths))
    create_seconds = time.monotonic() - started
    assert len(created) == PAGED_UPLOADS

    listing = list_pending_uploads(s3_store, table, older_than=ALL, threads=16)
    assert {u.upload_id for u in listing.uploads} == created
    assert s3_store.statistics.snapshot()["op_multipart_list"] >= 3, "every page was listed"

    report = abort_uploads(s3_store, listing, threads=16, retry_delay=0)
    assert (report.aborted, report.vanished, len(report.failed)) == (PAGED_UPLOADS, 0, 0)
    assert list(s3_store.list_multipart_uploads(table)) == []
    assert is_pending(s3_store, _root(s3_bucket, "big/table10/part-0"), neighbour)
    print(
        f"created {PAGED_UPLOADS} uploads in {create_seconds:.1f}s; aborted them in {report.seconds:.1f}s"
        " (16 threads)"
    )
