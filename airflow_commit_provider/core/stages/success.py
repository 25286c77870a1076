"""Writing `_SUCCESS` last: the one atomic signal that the job's output is complete.

`_SUCCESS`, the partition markers and the job record come from one pass over the sorted entries
(`stages.partitions`): a partition's marker is written, on the bounded pool, as the walk leaves the
partition, and its stats go to a spool sorted by partition. Nothing is held per file, and per
partition only what the current path holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import islice

from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.formats.success import FILENAMES_LIMIT, CommittedFile, SuccessData
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.sorted_spool import SortedSpool, key_order, record_size
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.partitions import PartitionTally, tally_partitions
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError


def save_success(
    ctx: JobContext, loaded: LoadedJob, *, per_partition: bool, table: str | None = None
) -> SuccessData:
    """Write the partitions' `_SUCCESS` (if asked), the destination's, then the job record.

    The record goes last: its existence is what makes the job COMMITTED rather than COMMITTING,
    so a job whose record exists has every marker in place. A table write's record names the
    table with its registration pending: registering is the driver's, after the commit (`core.catalog`).
    """
    spool = loaded.spool
    with ctx.phase("write _SUCCESS"), partition_stats(ctx, loaded, markers=per_partition) as partitions:
        success = _success_data(ctx, [entry.dest for entry in islice(spool, FILENAMES_LIMIT)])
        success.partitions = [name for _order, name, *_counts in partitions]
        success.file_count, success.total_bytes, success.rows = spool.count, spool.total_bytes, loaded.rows
        success.table = table
        with ctx.store.open_write(ctx.layout.success_marker) as stream:
            success.write_to(stream, (CommittedFile(entry.dest, entry.size) for entry in spool))
        success.partition_stats = {
            name: PartitionStats(files, size, rows) for _order, name, files, size, rows in partitions
        }
    # The record holds every phase up to here; writing it is the last step that counts.
    success.phases = list(ctx.phases)
    ctx.store.write_bytes(ctx.layout.job_record, success.to_bytes())
    return success


def partition_stats(ctx: JobContext, loaded: LoadedJob, *, markers: bool) -> SortedSpool:
    """What each partition directory received, as records `(key order of the partition as a
    directory, partition, files, bytes, rows)` sorted by partition (the caller closes the spool);
    with `markers`, each partition's `_SUCCESS` is written as the walk leaves it."""
    stats = SortedSpool(prefix="commit-partitions-")

    def closed() -> Iterator[PartitionTally]:
        for tally in tally_partitions(loaded.spool, loaded.partition_rows, FILENAMES_LIMIT if markers else 0):
            record = (key_order(f"{tally.name}/"), tally.name, tally.files, tally.size, tally.rows)
            stats.add(record, record_size(record))
            yield tally

    try:
        if markers:
            run_parallel(closed(), lambda tally: _save_marker(ctx, tally), ctx.options.threads)
        else:
            for _tally in closed():
                pass
        stats.sort()
    except BaseException:
        stats.close()
        raise
    return stats


def _save_marker(ctx: JobContext, tally: PartitionTally) -> None:
    """One partition's `_SUCCESS`: its counts (and rows) and first files, of this job."""
    marker = _success_data(ctx, tally.filenames)
    marker.partitions = [tally.name]
    marker.file_count, marker.total_bytes, marker.rows = tally.files, tally.size, tally.rows
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
