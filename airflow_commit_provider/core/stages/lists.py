"""Writing the job's file list, and its partition list past the inline cap, before the commit point.

The job's outcome names them (`JobOutcome.file_list`, `.partition_list`), so whoever rolls the
commit forward writes the same references into `_SUCCESS` and the record without writing the lists
again; two drivers of one job cannot overwrite each other's, because a list's name is its content's
SHA-256. They go with the job's work if it does not commit (`cleanup.discard_job_lists`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import (
    FileListEntry,
    ListRef,
    PartitionListWriter,
    iter_file_list,
    iter_partitions,
    write_file_list,
)
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import InlinePartitions
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.stages.load_manifests import LoadedJob
from airflow_commit_provider.core.stages.partitions import partition_name, partition_stats
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError


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
        inline = InlinePartitions()
        with PartitionListWriter(ctx.layout) as partitions:
            for partition, stats in partition_stats(loaded.spool, loaded.partition_rows):
                inline.add(partition)
                partitions.add(partition, stats)
            partition_list = None if inline.complete else partitions.finish(ctx.store)
    return JobLists(file_list, partition_list)


def lists_to_roll_forward(ctx: JobContext, loaded: LoadedJob, outcome: JobOutcome) -> JobLists:
    """The lists a job past its commit point is finished with: those its outcome names, each checked
    whole against its reference (size, SHA-256, rows); one missing or damaged is written again
    from the manifests, which give the same bytes and so the same name. An outcome from before
    the lists has none: they are written now.

    InvalidCommitDataError names the damaged list if the manifests give other lists than the
    outcome names (its job cannot be finished as decided; it needs a person).
    """
    named = JobLists.of(outcome)
    if named is None:
        return write_job_lists(ctx, loaded)
    with ctx.phase("check lists"):
        damage = _damage(ctx, named, str(ctx.layout.outcome))
    if damage is None:
        return named
    log.warning("job %s: writing its lists again: %s", ctx.job_id, damage)
    written = write_job_lists(ctx, loaded)
    if written != named:
        raise InvalidCommitDataError(
            f"{damage}; and the job's manifests give other lists ({written.file_list.path}) than its "
            f"outcome {ctx.layout.outcome} names"
        )
    return named


def _damage(ctx: JobContext, lists: JobLists, source: str) -> str | None:
    """What is wrong with the stored lists, None if each is whole and as referenced."""
    root = ctx.layout.destination
    try:
        next(iter_file_list(ctx.store, root, lists.file_list, source), None)
        if lists.partition_list is not None:
            next(iter_partitions(ctx.store, root, lists.partition_list, source), None)
    except (InvalidCommitDataError, FileNotFoundInStoreError) as error:
        return str(error)
    return None


def file_list_entries(spool: EntrySpool) -> Iterator[FileListEntry]:
    """The file list's rows, in the spool's order (the list's: by key)."""
    directory, partition = b"", ""
    for key, entry in spool.keyed():
        prefix = key[: key.rfind(b"/") + 1]
        if prefix != directory:
            directory, partition = prefix, partition_name(prefix)
        yield FileListEntry(entry.dest, entry.size, partition, entry.etags)
