"""Task attempts that write into a directory in the destination store itself.

Shared by the rename-based committers: file-v1, file-v2 and manifest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from airflow_commit_provider.core.committers.base import TaskAttempt
from airflow_commit_provider.core.formats.manifest import FileEntry, TaskManifest, write_task_manifest
from airflow_commit_provider.core.formats.partition_rows import record_partition_rows
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import RecordLog
from airflow_commit_provider.core.stages.task_commit import written_manifest
from airflow_commit_provider.core.store.base import FileStatus
from airflow_commit_provider.core.store.streams import PublishOnCloseStream


class StoreDirTaskAttempt(TaskAttempt):
    @property
    def work_dir(self) -> StorePath:
        return self.committer.layout.task_attempt_dir(self.task_attempt_id)

    def create_file(self, relative_path: str) -> PublishOnCloseStream:
        return self.store.open_write(self.work_dir.join(relative_path))

    def written_files(self, directory: StorePath | None = None) -> Iterator[tuple[FileStatus, str]]:
        """The attempt's files with their paths relative to the work directory (its own tree only),
        as the store lists them: one at a time, however many the attempt wrote."""
        root = directory or self.work_dir
        for status in self.store.list_files(root):
            yield status, status.path.relative_to(root)

    def needs_task_commit(self) -> bool:
        return any(True for _ in self.store.list_files(self.work_dir))

    def discard_output(self) -> bool:
        if self.committer.traits.exclusive_task_commit and self._holds_task_commit():
            return False  # the files in the work directory are the task's committed output
        self.store.delete_tree(self.work_dir)
        return True

    def publish_manifest(
        self, files: Iterable[FileEntry], rows: int | None, partition_rows: Mapping[str, int] | None = None
    ) -> TaskCommitResult:
        """Commit the attempt with a manifest of `files`, taken as they come (a task commit that
        renames makes them one rename at a time) and spooled on local disk, then written to a local
        file and published from there: nothing per file is held (HADOOP-19047). The manifest's
        statistics count the attempt's requests up to here, the renames included."""
        with RecordLog(prefix="task-manifest-files-") as spooled:
            total_bytes = 0
            for entry in files:
                spooled.add(entry.to_record())
                total_bytes += entry.size
            manifest = TaskManifest(
                job_id=self.committer.job_id,
                task_id=self.task_id,
                task_attempt_id=self.task_attempt_id,
                task_attempt_dir=self.work_dir.uri(),
                iostatistics=self.store_requests(),
            )
            if rows is not None:
                manifest.extra_data["rows"] = str(rows)
            record_partition_rows(manifest.extra_data, partition_rows)
            entries = (FileEntry(*record) for record in spooled)
            summary = self._summary(spooled.count, total_bytes, rows)
            with written_manifest(summary, lambda out: write_task_manifest(out, manifest, entries)) as file:
                return self._publish(file)
