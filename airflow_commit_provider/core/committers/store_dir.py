"""Task attempts that write into a directory in the destination store itself.

Shared by the rename-based committers: file-v1, file-v2 and manifest.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_commit_provider.core.committers.base import TaskAttempt
from airflow_commit_provider.core.formats.manifest import FileEntry, TaskManifest
from airflow_commit_provider.core.formats.partition_rows import record_partition_rows
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.manifests import decode_task_manifest
from airflow_commit_provider.core.store.base import FileStatus
from airflow_commit_provider.core.store.streams import PublishOnCloseStream


class StoreDirTaskAttempt(TaskAttempt):
    @property
    def work_dir(self) -> StorePath:
        return self.committer.layout.task_attempt_dir(self.task_attempt_id)

    def create_file(self, relative_path: str) -> PublishOnCloseStream:
        return self.store.open_write(self.work_dir.join(relative_path))

    def written_files(self, directory: StorePath | None = None) -> list[tuple[FileStatus, str]]:
        """The attempt's files with their paths relative to the work directory (its own tree only)."""
        root = directory or self.work_dir
        return [(status, status.path.relative_to(root)) for status in self.store.list_files(root)]

    def needs_task_commit(self) -> bool:
        return any(True for _ in self.store.list_files(self.work_dir))

    def discard_output(self) -> bool:
        if self.committer.traits.exclusive_task_commit and self._holds_task_commit():
            return False  # the files in the work directory are the task's committed output
        self.store.delete_tree(self.work_dir)
        return True

    def build_manifest(
        self, files: list[FileEntry], rows: int | None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskManifest:
        manifest = TaskManifest(
            job_id=self.committer.job_id,
            task_id=self.task_id,
            task_attempt_id=self.task_attempt_id,
            task_attempt_dir=self.work_dir.uri(),
            files=files,
            iostatistics=self.store_requests(),
        )
        if rows is not None:
            manifest.extra_data["rows"] = str(rows)
        record_partition_rows(manifest.extra_data, partition_rows)
        return manifest

    def publish_manifest(self, manifest: TaskManifest):
        data = manifest.to_bytes()
        return self._publish(decode_task_manifest(data, str(self.work_dir)), data)
