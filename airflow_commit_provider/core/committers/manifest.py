"""Hadoop's manifest committer: task commit saves a manifest of the attempt's files; job commit
renames them all in parallel. Correct only where file rename is atomic, so never on S3.
``replace`` swaps the partitions it writes (`PartitionSwapping`)."""

from __future__ import annotations

from collections.abc import Mapping

from airflow_commit_provider.core.committers.store_dir import StoreDirTaskAttempt
from airflow_commit_provider.core.committers.swapping import PartitionSwapping
from airflow_commit_provider.core.committers.traits import CommitterTraits, JvmCommitter
from airflow_commit_provider.core.formats.manifest import FileEntry
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.stages import commit_files
from airflow_commit_provider.core.stages.manifests import decode_task_manifest


class ManifestCommitter(PartitionSwapping):
    name = "manifest"
    required_capabilities = ("atomic_rename", "consistent_listing")
    traits = CommitterTraits(
        family="rename",
        conflicts=None,
        swaps_partitions=True,
        exclusive_task_commit=True,
        unsafe=False,
        partition_markers=False,
        jvm=JvmCommitter(
            "manifest",
            records_job_id=False,
            success_names=("org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",),
        ),
    )
    decoder = staticmethod(decode_task_manifest)
    entry_action = staticmethod(commit_files.rename_entry)

    def task_attempt(self, task: int, attempt: int) -> _ManifestTaskAttempt:
        return _ManifestTaskAttempt(self, task, attempt)


class _ManifestTaskAttempt(StoreDirTaskAttempt):
    def commit_task(
        self, rows: int | None = None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        files = (
            FileEntry(status.path.uri(), self.destination_of(relative).uri(), status.size)
            for status, relative in self.written_files()
        )
        result = self.publish_manifest(files, rows, partition_rows)
        if result.adopted_from:
            self.discard_output()
        return result
