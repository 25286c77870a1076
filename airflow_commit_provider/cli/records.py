"""`airflow-commit records list|prune|reindex DESTINATION`: the per-job records under
`<destination>/_airflow_commit/` (`cleanup.records`), pruned by age and the newest kept."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from airflow_commit_provider.cleanup import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_RECORDS_OLDER_THAN,
    JobRecords,
    RecordListing,
    find_job_records,
    format_duration,
    prune_records,
    reindex_records,
)
from airflow_commit_provider.cli.arguments import (
    DESTINATION,
    Parents,
    Parser,
    add_allow_bucket_root,
    add_scope,
    count,
    duration,
    scope_of,
    store_for,
)
from airflow_commit_provider.cli.cleanup import Cleanup, selection
from airflow_commit_provider.cli.output import Table, emit, progress_for
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.progress import Progress, format_size


def add_commands(groups: Any, parents: Parents) -> None:
    commands = groups.add_parser(
        "records", help="per-job commit records under <destination>/_airflow_commit/"
    ).add_subparsers(dest="command", required=True)
    aged = parents.scoped(
        DEFAULT_RECORDS_OLDER_THAN,
        DESTINATION,
        "the destination (a table's root folder) whose records are listed or pruned",
    )
    policy = Parser(add_help=False)
    policy.add_argument(
        "--keep-newest",
        type=count,
        default=0,
        metavar="N",
        help="also keep the N newest of the jobs older than --older-than (default 0)",
    )
    policy.add_argument(
        "--max-job-duration",
        type=duration,
        default=DEFAULT_MAX_JOB_DURATION,
        metavar="DURATION",
        help="the longest a job runs; --older-than may not be shorter, so that no abort outcome "
        f"still fencing an orphaned driver goes (default {format_duration(DEFAULT_MAX_JOB_DURATION.total_seconds())})",
    )
    commands.add_parser(
        "list", parents=[aged, policy], help="list jobs with records, and which may go"
    ).set_defaults(handler=RECORDS.show)
    commands.add_parser(
        "prune",
        parents=[aged, policy, parents.destructive],
        help="delete every file of the jobs older than --older-than but the --keep-newest newest, "
        "and index the jobs kept that lack an index entry",
    ).set_defaults(handler=RECORDS.list_confirm_act)
    reindex = commands.add_parser(
        "reindex",
        parents=[parents.common],
        help="write the records index entries that decided jobs lack (jobs from before the index)",
    )
    add_scope(reindex, DESTINATION, "the destination whose records are indexed")
    add_allow_bucket_root(reindex)
    reindex.add_argument(
        "--dry-run", action="store_true", help="report which jobs lack an entry, write nothing"
    )
    reindex.set_defaults(handler=_reindex)


def _find(args: argparse.Namespace, store: Store, progress: Progress) -> RecordListing:
    return find_job_records(
        store,
        progress=progress,
        keep_newest=args.keep_newest,
        max_job_duration=args.max_job_duration,
        **selection(args),
    )


def _row(job: JobRecords) -> str:
    state = "prunable" if job.stale else f"kept:{job.keep}"
    kinds = ",".join(job.kinds)
    return (
        f"{state:<11} {format_duration(job.age_seconds):>7} {len(job.files):>5} {format_size(job.bytes):>10}  "
        f"{kinds:<25} {job.job_id}{'  (' + job.error + ')' if job.error else ''}"
    )


TABLE = Table(f"{'STATE':<11} {'AGE':>7} {'FILES':>5} {'SIZE':>10}  {'KINDS':<25} JOB", _row)


def _question(args: argparse.Namespace, listing: RecordListing) -> str:
    kept = f" (keeping the {args.keep_newest} newest of those)" if args.keep_newest else ""
    return (
        f"Prune the records of {listing.target_count} jobs older than {listing.age}{kept} "
        f"in {listing.records_dir}?"
    )


RECORDS = Cleanup(_find, TABLE, "prune job records", _question, "Nothing pruned.", prune_records)


def _reindex(args: argparse.Namespace) -> int:
    scope_of(args)
    with store_for(args, args.scope).session() as store, progress_for(args) as progress:
        report = reindex_records(
            store,
            args.scope,
            dry_run=args.dry_run,
            allow_bucket_root=args.allow_bucket_root,
            threads=args.threads,
            progress=progress,
        )
    if args.json:
        emit(report.to_json())
    else:
        print(report.describe())
        for job_id, error in sorted(report.errors.items()):
            print(f"FAILED {job_id}: {error}", file=sys.stderr)
    return 1 if report.errors else 0
