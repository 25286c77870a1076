"""`uploads list|abort SCOPE`: the pending multipart uploads failed jobs leave
(`cleanup.uploads`), billed and invisible to listings."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from airflow_commit_provider.cleanup import (
    UploadInfo,
    UploadListing,
    abort_uploads,
    format_duration,
    list_pending_uploads,
)
from airflow_commit_provider.cli.cleanup import Cleanup, selection
from airflow_commit_provider.cli.output import Table
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.progress import Progress, format_size


def _row(upload: UploadInfo) -> str:
    initiated = datetime.fromtimestamp(upload.initiated, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return (
        f"{initiated:<25} {format_duration(upload.age_seconds):>7} {_or_dash(upload.parts):>5} "
        f"{'-' if upload.bytes is None else format_size(upload.bytes):>10}  {upload.path.key}  {upload.upload_id}"
    )


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


TABLE = Table(f"{'INITIATED':<25} {'AGE':>7} {'PARTS':>5} {'SIZE':>10}  KEY  UPLOAD-ID", _row)


def _find(args: argparse.Namespace, store: Store, progress: Progress) -> UploadListing:
    """Sizes cost a request per upload: a listing (which has no --sizes) measures them, an abort only
    for a dry run or with --sizes."""
    sizes = not hasattr(args, "sizes") or args.sizes or args.dry_run
    return list_pending_uploads(
        store, progress=progress, sizes=sizes, max_job_duration=args.max_job_duration, **selection(args)
    )


def _question(args: argparse.Namespace, listing: UploadListing) -> str:
    size = "size not measured" if listing.total_bytes is None else format_size(listing.total_bytes)
    return f"Abort {listing.count} uploads ({size}) under {listing.scope} older than {listing.age}?"


UPLOADS = Cleanup(_find, TABLE, "abort uploads", _question, "Nothing aborted.", abort_uploads)


def list_pending(args: argparse.Namespace) -> int:
    """`uploads list`."""
    return UPLOADS.show(args)


def abort_pending(args: argparse.Namespace) -> int:
    """`uploads abort`."""
    return UPLOADS.list_confirm_act(args)
