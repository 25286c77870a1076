"""Writing the job's file list, and its partition list past the inline cap, before the commit point.

The job's outcome names them (`JobOutcome.file_list`, `.partition_list`), so whoever rolls the
commit forward writes the same references into `_SUCCESS` and the record without writing the lists
again; two drivers of one job cannot overwrite each other's, because a list's name is its content's
SHA-256. They go with the job's work if it does not commit (`cleanup.discard_job_lists`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from airflow_commit_provider.core.formats.file_list import (
    FileListEntry,
    ListRef,
    write_file_list,
    write_partition_list,
)
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import InlinePartitions
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.partitions import iter_stats, partition_name, partition_stats


@dataclass(frozen=True)
class JobLists:
    file_list: ListRef
    partition_list: ListRef | None
    """None when `_SUCCESS` lists every partition inline."""

    @classmethod
    def of(cls, outcome: JobOutcome) -> JobLists | None:
        """The lists a commit outcome names; None for an outcome from before the lists."""
        return None if outcome.file_list is None else cls(outcome.file_list, outcome.partition_list)


def write_job_lists(ctx: JobContext, loaded: LoadedJob) -> JobLists:
    """Write the file list (one pass over the sorted entries) and, when `_SUCCESS` cannot list every
    partition inline, the partition list (one walk over them)."""
    with ctx.phase("write lists"):
        file_list = write_file_list(ctx.store, ctx.layout, file_list_entries(loaded.spool))
        with partition_stats(loaded.spool, loaded.partition_rows) as stats:
            inline = InlinePartitions()
            for partition, _ in iter_stats(stats):
                inline.add(partition)
            partition_list = (
                None if inline.complete else write_partition_list(ctx.store, ctx.layout, iter_stats(stats))
            )
    return JobLists(file_list, partition_list)


def file_list_entries(spool: EntrySpool) -> Iterator[FileListEntry]:
    """The file list's rows, in the spool's order (the list's: by key)."""
    directory, partition = b"", ""
    for key, entry in spool.keyed():
        prefix = key[: key.rfind(b"/") + 1]
        if prefix != directory:
            directory, partition = prefix, partition_name(prefix)
        yield FileListEntry(entry.dest, entry.size, partition, entry.etags)
