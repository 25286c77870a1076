"""The sentences a cleanup listing and report say of themselves, which the CLI prints and the operators log or raise."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from airflow_commit_provider.cleanup.records import (
    PRUNED,
    WOULD_PRUNE,
    JobRecords,
    RecordListing,
    RecordOutcome,
    RecordPruneReport,
)
from airflow_commit_provider.cleanup.reports import FAILED
from airflow_commit_provider.cleanup.temp_trees import TempTree, TempTreeListing
from airflow_commit_provider.cleanup.uploads import (
    ABORTED,
    AbortOutcome,
    AbortReport,
    UploadInfo,
    UploadListing,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus

NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)
SCOPE = StorePath("s3", "bucket", "lake/t")


def _job(job_id: str, size: int) -> JobRecords:
    status = FileStatus(SCOPE.join("_airflow_commit", f"{job_id}.json"), size, 0.0)
    return JobRecords(job_id, (status,), ("success",), newest=0.0, age_seconds=86400 * 40)


def _records_report(*outcomes: RecordOutcome, dry_run: bool = False) -> RecordPruneReport:
    listing = RecordListing(SCOPE, timedelta(days=30), NOW, None, records_dir=SCOPE.join("_airflow_commit"))
    listing.jobs = [outcome.job for outcome in outcomes]
    return RecordPruneReport.from_outcomes(listing, dry_run, outcomes, seconds=1.5)


def test_a_report_says_what_it_did_and_what_failed() -> None:
    report = _records_report(
        RecordOutcome(_job("job-a", 1536), PRUNED),
        RecordOutcome(_job("job-b", 10), FAILED, error="AccessDenied"),
    )
    assert report.describe() == (
        "Pruned the records of 1 jobs older than 30d in s3://bucket/lake/t/_airflow_commit: 1 files, "
        "1.5 KiB; kept 0 recent, 0 committing, 0 unreadable, 0 written to meanwhile; 1 failed in 1.5s"
    )
    assert report.failure_message() == (
        "the records of 1 of 2 jobs in s3://bucket/lake/t/_airflow_commit could not be pruned; "
        "first: job-b (AccessDenied)"
    )


def test_a_dry_run_says_what_it_would_do_and_nothing_failed() -> None:
    report = _records_report(RecordOutcome(_job("job-a", 10), WOULD_PRUNE), dry_run=True)
    line = report.describe()
    assert line.startswith("Would prune the records of 1 jobs older than 30d") and line.endswith("(dry run)")
    assert report.failure_message() is None


def test_an_abort_report_says_whether_sizes_were_measured() -> None:
    upload = UploadInfo(SCOPE.join("part-0"), "upload-1", initiated=0.0, age_seconds=90, parts=2, bytes=20)
    for measured, sizes in ((True, ": 20 B in 2 parts; "), (False, ": sizes not measured (--sizes or ")):
        listing = UploadListing(SCOPE, timedelta(seconds=60), NOW, None, sizes_measured=measured)
        listing.add(upload)
        report = AbortReport.from_outcomes(listing, False, [AbortOutcome(upload, ABORTED)], seconds=0.5)
        line = report.describe()
        assert line.startswith(f"Aborted 1 uploads older than 1m under {SCOPE}{sizes}"), line
        assert line.endswith(
            "0 kept for jobs past their commit point, 0 kept for live jobs; 0 failed in 0.5s"
        )


def _tree(name: str, *, stale: bool, committing: bool = False) -> TempTree:
    return TempTree(
        SCOPE.join("_temporary", name),
        "temporary",
        name,
        files=3,
        bytes=3072,
        uploads=0,
        newest=0.0,
        age_seconds=7200.0,
        stale=stale,
        committing=committing,
    )


def test_every_listing_says_what_it_found_and_hands_out_what_its_cleanup_acts_on() -> None:
    """The three kinds as the CLI's one flow reads them (`CleanupListing`): the closing line of a
    list command, every item, and the targets (all uploads; the stale trees and jobs only)."""
    uploads = UploadListing(SCOPE, timedelta(hours=6), NOW, None, too_recent=1, sizes_measured=True)
    uploads.add(
        UploadInfo(SCOPE.join("part-0"), "upload-1", initiated=0.0, age_seconds=90, parts=2, bytes=20)
    )
    trees = TempTreeListing(SCOPE, timedelta(hours=1), NOW, None)
    for tree in (
        _tree("j1", stale=True),
        _tree("j2", stale=False, committing=True),
        _tree("j3", stale=False),
    ):
        trees.add(tree)
    records = RecordListing(SCOPE, timedelta(days=30), NOW, None, records_dir=SCOPE.join("_airflow_commit"))
    records.jobs = [_job("job-a", 1536), replace(_job("job-b", 10), keep="recent")]
    try:
        assert uploads.describe() == (
            f"1 pending uploads older than 6h under {SCOPE}: 20 B in 2 parts "
            "(1 more recent, 0 of other jobs, 0 of jobs past their commit point, 0 of live jobs)"
        )
        assert trees.describe() == (
            f"3 temporary trees under {SCOPE}; 1 stale (no writes for 1h): 3.0 KiB in 3 files; "
            "1 kept for jobs past their commit point, 0 for live jobs"
        )
        assert records.describe() == (
            f"2 jobs with records in {SCOPE.join('_airflow_commit')}; 1 may go (1.5 KiB); kept: 1 younger "
            "than 30d, 0 of the newest, 0 committing, 0 unreadable; 0 without an index entry"
        )
        for listing, items, targets in (
            (uploads, ["upload-1"], ["upload-1"]),
            (trees, ["j1", "j2", "j3"], ["j1"]),
            (records, ["job-a", "job-b"], ["job-a"]),
        ):
            assert [_name(item.to_json()) for item in listing.items()] == items
            assert [_name(item.to_json()) for item in listing.targets()] == targets
            assert listing.target_count == len(targets)
            assert set(listing.summary_json()) >= {"scope", "older_than_seconds", "job_id"}
            assert listing.DETAILS not in listing.summary_json(), "the items are streamed after it"
    finally:
        uploads.close()
        trees.close()


def _name(item: dict[str, object]) -> object:
    return item.get("upload_id") or item["job_id"]
