"""`records list|prune|reindex DESTINATION`: the per-job records under
`<destination>/_airflow_commit/` (`cleanup.records`), pruned by age and the newest kept."""

from __future__ import annotations

import argparse
import sys

from airflow_commit_provider.cleanup import (
    JobRecords,
    RecordListing,
    find_job_records,
    format_duration,
    prune_records,
    reindex_records,
)
from airflow_commit_provider.cli.arguments import scope_of, store_for
from airflow_commit_provider.cli.cleanup import Cleanup, selection
from airflow_commit_provider.cli.output import Table, emit, for_machines, progress_for
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.progress import Progress, format_size


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


def list_records(args: argparse.Namespace) -> int:
    """`records list`."""
    return RECORDS.show(args)


def prune(args: argparse.Namespace) -> int:
    """`records prune`."""
    return RECORDS.list_confirm_act(args)


def reindex(args: argparse.Namespace) -> int:
    """`records reindex`."""
    scope_of(args)
    with store_for(args, args.destination).session() as store, progress_for(args) as progress:
        report = reindex_records(
            store,
            args.destination,
            dry_run=args.dry_run,
            allow_bucket_root=args.allow_bucket_root,
            threads=args.threads,
            progress=progress,
        )
    if for_machines(args):
        emit(report.to_json(), args)
    else:
        print(report.describe())
        for job_id, error in sorted(report.errors.items()):
            print(f"FAILED {job_id}: {error}", file=sys.stderr)
    return 1 if report.errors else 0
