"""Writing `_SUCCESS` last: the one atomic signal that the job's output is complete.

`_SUCCESS`, the partition markers and the job record come from one pass over the sorted entries
(`stages.partitions`): a partition's marker is written, on the bounded pool, as the walk leaves the
partition, and its stats go to a spool sorted by partition. Nothing is held per file, and per
partition only what the current path holds.
"""

from __future__ import annotations

import functools
import os
from itertools import islice

from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.formats.success import FILENAMES_LIMIT, InlinePartitions, SuccessData
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.stages.lists import JobLists
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.partitions import (
    PartitionTally,
    partition_stats,
    tally_partitions,
)
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError


def save_success(
    ctx: JobContext, loaded: LoadedJob, lists: JobLists, *, per_partition: bool, table: str | None = None
) -> SuccessData:
    """Write the partitions' `_SUCCESS` (if asked), the destination's, then the job record.

    The record goes last: its existence is what makes the job COMMITTED rather than COMMITTING,
    so a job whose record exists has every marker in place. A table write's record names the
    table with its registration pending: registering is the driver's, after the commit (`core.catalog`).
    Both name the job's lists (written before the commit point) instead of listing what they hold.
    """
    spool = loaded.spool
    with ctx.phase("write _SUCCESS"):
        inline = InlinePartitions()
        stats: dict[str, PartitionStats] = {}
        for name, counts in partition_stats(
            spool,
            loaded.partition_rows,
            keep_filenames=FILENAMES_LIMIT if per_partition else 0,
            each=functools.partial(_save_marker, ctx, lists) if per_partition else None,
            threads=ctx.options.threads,
        ):
            inline.add(name)
            if len(inline.names) == len(stats) + 1:
                stats[name] = counts
        success = _success_data(ctx, [entry.dest for entry in islice(spool, FILENAMES_LIMIT)])
        success.partitions, success.partition_count = inline.names, inline.count
        success.partition_list = None if inline.complete else lists.partition_list
        success.file_list = lists.file_list
        success.file_count, success.total_bytes, success.rows = spool.count, spool.total_bytes, loaded.rows
        success.table = table
        ctx.store.write_bytes(ctx.layout.success_marker, success.to_bytes())
    # The record holds every phase up to here; writing it is the last step that counts.
    success.phases = list(ctx.phases)
    success.partition_stats = stats
    ctx.store.write_bytes(ctx.layout.job_record, success.to_bytes())
    return success


def _save_marker(ctx: JobContext, lists: JobLists, tally: PartitionTally) -> None:
    """One partition's `_SUCCESS`: its counts (and rows) and first files, of this job, and the job's
    file list (whose rows of this partition are the partition's files)."""
    marker = _success_data(ctx, tally.filenames)
    marker.partitions = [tally.name]
    marker.file_count, marker.total_bytes, marker.rows = tally.files, tally.size, tally.rows
    marker.file_list = lists.file_list
    ctx.store.write_bytes(ctx.layout.partition_success(tally.name), marker.to_bytes())


def delete_partition_markers(ctx: JobContext, spool: EntrySpool) -> None:
    """Before a partition changes, its old `_SUCCESS` goes, as job setup removes the table's."""
    ctx.store.delete_files(
        ctx.layout.partition_success(tally.name) for tally in tally_partitions(spool, None)
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
