"""Writing `_SUCCESS` last: the one atomic signal that the job's output is complete."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from itertools import islice

from airflow_commit_provider.core.formats.success import FILENAMES_LIMIT, CommittedFile, SuccessData
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError


def save_success(
    ctx: JobContext,
    spool: EntrySpool,
    rows: int | None,
    *,
    per_partition: bool,
    partition_rows: Mapping[str, int] | None = None,
    table: str | None = None,
) -> SuccessData:
    """Write the partitions' `_SUCCESS` (if asked), the destination's, then the job record.

    The record goes last: its existence is what makes the job COMMITTED rather than COMMITTING,
    so a job whose record exists has every marker in place. A table write's record names the
    table with its registration pending: registering is the driver's, after the commit (`core.catalog`).
    """
    if per_partition:
        save_partition_markers(ctx, spool, partition_rows)
    success = _success_data(ctx, [entry.dest for entry in islice(spool, FILENAMES_LIMIT)])
    success.partitions = sorted(spool.partitions)
    success.file_count, success.total_bytes, success.rows = spool.count, spool.total_bytes, rows
    success.table = table
    with ctx.store.open_write(ctx.layout.success_marker) as stream:
        success.write_to(stream, (CommittedFile(entry.dest, entry.size) for entry in spool))
    ctx.store.write_bytes(ctx.layout.job_record, success.to_bytes())
    return success


def save_partition_markers(
    ctx: JobContext, spool: EntrySpool, partition_rows: Mapping[str, int] | None = None
) -> int:
    """One `_SUCCESS` per partition written, listing that partition's files (and rows) of this job.

    Holds one (URI, size) pair per file in memory, grouped by partition, for the time it takes.
    """
    root = ctx.layout.destination
    by_partition: dict[str, list[CommittedFile]] = defaultdict(list)
    for entry in spool:
        relative = StorePath.from_uri(entry.dest).relative_to(root)
        if "/" in relative:
            by_partition[relative.rsplit("/", 1)[0]].append(CommittedFile(entry.dest, entry.size))

    def save(partition: str) -> None:
        files = by_partition[partition]
        marker = _success_data(ctx, [committed.uri for committed in files[:FILENAMES_LIMIT]])
        marker.partitions = [partition]
        marker.file_count, marker.total_bytes = len(files), sum(committed.size for committed in files)
        if partition_rows is not None:
            marker.rows = partition_rows.get(partition, 0)
        marker.files = files
        ctx.store.write_bytes(ctx.layout.partition_success(partition), marker.to_bytes())

    return run_parallel(sorted(by_partition), save, ctx.options.threads)


def delete_partition_markers(ctx: JobContext, spool: EntrySpool) -> None:
    """Before a partition changes, its old `_SUCCESS` goes, as job setup removes the table's."""
    ctx.store.delete_files(
        [ctx.layout.partition_success(partition) for partition in sorted(spool.partitions)]
    )


def _success_data(ctx: JobContext, filenames: list[str]) -> SuccessData:
    return SuccessData(
        committer=ctx.committer,
        job_id=ctx.job_id,
        job_id_source=ctx.options.job_id_source,
        description=f"airflow-commit-provider {ctx.committer} committer",
        diagnostics={
            "airflow_commit.threads": str(ctx.options.threads),
            "airflow_commit.conflict_mode": ctx.options.conflict_mode,
            "principal": os.environ.get("USER", ""),
            "stage": "committer_commit_job",
        },
        filenames=filenames,
        iostatistics=ctx.job_statistics(),
    )


def read_job_record(ctx: JobContext) -> SuccessData | None:
    """The job's own record, or None before the job is COMMITTED."""
    try:
        return load_job_record(ctx.store, ctx.layout.destination, ctx.job_id)
    except FileNotFoundInStoreError:
        return None
