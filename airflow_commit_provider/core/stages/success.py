"""Writing `_SUCCESS` last: the one atomic signal that the job's output is complete."""

from __future__ import annotations

import os

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import FILENAMES_LIMIT, CommittedFile, SuccessData
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError


def save_success(ctx: JobContext, spool: EntrySpool, rows: int | None) -> SuccessData:
    files = (CommittedFile(entry.dest, entry.size) for entry in spool)
    filenames = []
    for entry in spool:
        if len(filenames) >= FILENAMES_LIMIT:
            break
        filenames.append(entry.dest)
    success = SuccessData(
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
        iostatistics=ctx.statistics,
        partitions=sorted(spool.partitions),
        file_count=spool.count,
        total_bytes=spool.total_bytes,
        rows=rows,
    )
    with ctx.store.open_write(ctx.layout.success_marker) as stream:
        success.write_to(stream, files)
    return success


def read_success(ctx: JobContext) -> SuccessData | None:
    """The destination's `_SUCCESS`, or None if it is missing or unreadable."""
    try:
        data = ctx.store.read_bytes(ctx.layout.success_marker)
        return SuccessData.from_bytes(data, str(ctx.layout.success_marker))
    except (FileNotFoundInStoreError, InvalidCommitDataError):
        return None
