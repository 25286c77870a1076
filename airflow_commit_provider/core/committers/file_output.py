"""Hadoop's FileOutputCommitter algorithms v1 and v2, kept as the baseline to measure against.

On S3 every "rename" is a copy plus a delete: v1 copies each file twice, v2 once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from airflow_commit_provider.core.committers.base import Committer
from airflow_commit_provider.core.committers.store_dir import StoreDirTaskAttempt
from airflow_commit_provider.core.committers.swapping import PartitionSwapping
from airflow_commit_provider.core.committers.traits import CommitterTraits, JvmCommitter
from airflow_commit_provider.core.formats.manifest import FileEntry
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import commit_files
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import CommitEntry
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.stages.manifests import decode_task_manifest


class FileOutputV1Committer(PartitionSwapping):
    """v1: task commit renames the attempt directory to the committed-task directory; job commit
    renames every committed file into place. The last attempt of a task wins. ``replace`` swaps
    the partitions it writes (`PartitionSwapping`)."""

    name = "file-v1"
    traits = CommitterTraits(
        family="rename",
        conflicts=None,
        swaps_partitions=True,
        exclusive_task_commit=False,
        unsafe=False,
        partition_markers=False,
        jvm=JvmCommitter("file-output", records_job_id=False, json_success=False, aliases=("file",)),
    )
    decoder = staticmethod(decode_task_manifest)
    entry_action = staticmethod(commit_files.rename_entry)

    def task_attempt(self, task: int, attempt: int) -> _V1TaskAttempt:
        return _V1TaskAttempt(self, task, attempt)


class _V1TaskAttempt(StoreDirTaskAttempt):
    def commit_task(
        self, rows: int | None = None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        self._require_active_job()
        committed_dir = self.committer.layout.committed_task_dir(self.task_id)
        self.store.delete_tree(committed_dir)
        return self.publish_manifest(self._renamed_into(committed_dir), rows, partition_rows)

    def _renamed_into(self, committed_dir: StorePath) -> Iterator[FileEntry]:
        """Each file of the attempt renamed into the committed task's directory, as it is listed."""
        for status, relative in self.written_files():
            target = committed_dir.join(relative)
            self.store.rename_file(status.path, target)
            yield FileEntry(target.uri(), self.destination_of(relative).uri(), status.size)


def _verify_in_place(ctx: JobContext, entry: CommitEntry) -> None:
    status = ctx.store.get_status(StorePath.from_uri(entry.dest))
    if status is None or status.size != entry.size:
        raise CommitError(f"job {ctx.job_id}: file-v2 task output {entry.dest} is missing or changed")


class FileOutputV2Committer(Committer):
    """v2: task commit renames files straight into the destination, so committed task output is
    visible before job commit and a task commit that fails part way leaves mixed output."""

    name = "file-v2"
    traits = CommitterTraits(
        family="rename",
        conflicts=None,
        swaps_partitions=False,
        exclusive_task_commit=False,
        unsafe=True,
        partition_markers=False,
        jvm=JvmCommitter("file-output", records_job_id=False, json_success=False, algorithm_version=2),
    )
    decoder = staticmethod(decode_task_manifest)
    entry_action = staticmethod(_verify_in_place)

    def task_attempt(self, task: int, attempt: int) -> _V2TaskAttempt:
        return _V2TaskAttempt(self, task, attempt)


class _V2TaskAttempt(StoreDirTaskAttempt):
    def commit_task(
        self, rows: int | None = None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        self._require_active_job()  # never rename into the destination of a finished job
        return self.publish_manifest(self._renamed_into_place(), rows, partition_rows)

    def _renamed_into_place(self) -> Iterator[FileEntry]:
        """Each file of the attempt renamed to its destination, as it is listed."""
        for status, relative in self.written_files():
            dest = self.destination_of(relative)
            self.store.rename_file(status.path, dest)
            yield FileEntry(dest.uri(), dest.uri(), status.size)
