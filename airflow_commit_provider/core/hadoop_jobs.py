"""Aborting a job that Hadoop's own JVM committers ran, from outside its driver.

Hadoop's committers keep no outcome or upload records this side can rely on, so this abort is a
best effort over what they do leave in the destination: the S3A magic committer's
``.pending``/``.pendingset`` files under ``__magic_job-<job ID>`` name its pending uploads, and
the job's temporary trees carry its job ID.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from airflow_commit_provider.core.cleanup import TempCleanReport, clean_stale_temp_trees
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.pending import is_pending_file, read_pending_commits
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import log
from airflow_commit_provider.core.store.base import Store, StoreError

__all__ = ["HadoopAbortReport", "abort_hadoop_job"]


@dataclass(frozen=True)
class HadoopAbortReport:
    """What an abort of a Hadoop job removed: the uploads it aborted, the temporary trees it deleted."""

    job_id: str
    uploads_aborted: int
    temp_trees: TempCleanReport

    def describe(self) -> str:
        return (
            f"job {self.job_id}: aborted {self.uploads_aborted} uploads; "
            f"temporary trees: {self.temp_trees.to_json()}"
        )


def abort_hadoop_job(store: Store, destination: str | StorePath, job_id: str) -> HadoopAbortReport:
    """Abort the uploads the S3A magic committer listed for `job_id`, then delete its temporary trees.

    The trees are ``__magic_job-<id>``, ``_temporary/<id>``, ``.spark-staging-<id>`` and the like.
    The S3A staging committers keep their upload lists on the cluster filesystem, so their uploads
    are left to the pending-upload cleanup. The manifest committer's ``_temporary/manifest_<id>``
    carries Spark's own write UUID and the classic committer's ``_temporary/0`` is shared by all
    jobs: those are left to the temporary-tree cleanup, which deletes them once they are stale.
    """
    root = StorePath.parse(destination)
    magic_dir = JobLayout(root, validate_job_id(job_id), magic=True).job_dir
    aborted = 0
    if store.capabilities.multipart_upload:
        for status in list(store.list_files(magic_dir)):
            if not is_pending_file(status.path.name):
                continue
            try:
                commits = read_pending_commits(store.read_bytes(status.path), str(status.path))
            except (InvalidCommitDataError, StoreError) as error:
                log.warning("skipping unreadable %s: %s", status.path, error)
                continue
            for commit in commits:
                with contextlib.suppress(StoreError):
                    store.abort_multipart_upload(StorePath.from_uri(commit.uri), commit.upload_id)
                    aborted += 1
    trees = clean_stale_temp_trees(store, root, older_than=0, job_id=job_id, allow_bucket_root=True)
    return HadoopAbortReport(job_id, aborted, trees)
