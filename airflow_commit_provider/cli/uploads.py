"""`airflow-commit uploads list|abort SCOPE`: the pending multipart uploads failed jobs leave
(`cleanup.uploads`), billed and invisible to listings."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from airflow_commit_provider.cleanup import (
    DEFAULT_OLDER_THAN,
    Progress,
    UploadInfo,
    UploadListing,
    abort_uploads,
    format_duration,
    format_size,
    list_pending_uploads,
)
from airflow_commit_provider.cli.arguments import Parents, add_live_job_fence
from airflow_commit_provider.cli.cleanup import Cleanup, selection
from airflow_commit_provider.cli.output import Table
from airflow_commit_provider.core.store import Store


def add_commands(groups: Any, parents: Parents) -> None:
    scoped = parents.scoped(DEFAULT_OLDER_THAN)
    add_live_job_fence(scoped)
    commands = groups.add_parser("uploads", help="pending multipart uploads").add_subparsers(
        dest="command", required=True
    )
    commands.add_parser("list", parents=[scoped], help="list pending uploads with their sizes").set_defaults(
        handler=UPLOADS.show
    )
    abort = commands.add_parser("abort", parents=[scoped, parents.destructive], help="abort pending uploads")
    abort.add_argument(
        "--sizes",
        action="store_true",
        help="measure parts and bytes first; one more request per upload (a dry run always measures)",
    )
    abort.set_defaults(handler=UPLOADS.list_confirm_act)


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
    """Sizes cost a request per upload: a listing measures them, an abort only for a dry run or
    with --sizes."""
    sizes = args.command == "list" or args.sizes or args.dry_run
    return list_pending_uploads(
        store, progress=progress, sizes=sizes, max_job_duration=args.max_job_duration, **selection(args)
    )


def _question(args: argparse.Namespace, listing: UploadListing) -> str:
    size = "size not measured" if listing.total_bytes is None else format_size(listing.total_bytes)
    return f"Abort {listing.count} uploads ({size}) under {listing.scope} older than {listing.age}?"


UPLOADS = Cleanup(_find, TABLE, "abort uploads", _question, "Nothing aborted.", abort_uploads)
