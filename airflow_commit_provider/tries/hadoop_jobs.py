"""Aborting a job that Hadoop's own JVM committers ran, from outside its driver.

Hadoop's committers keep no outcome or upload records this side can rely on, so this abort is a
best effort over what they do leave in the destination: the S3A magic committer's
``.pending``/``.pendingset`` files under ``__magic_job-<job ID>`` name its pending uploads, and
the job's temporary trees carry its job ID.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_commit_provider.cleanup import TempCleanReport, clean_stale_temp_trees
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.uploads import abort_hadoop_magic_uploads
from airflow_commit_provider.core.store.base import Store

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
    aborted = abort_hadoop_magic_uploads(store, root, job_id)
    trees = clean_stale_temp_trees(store, root, older_than=0, job_id=job_id, allow_bucket_root=True)
    return HadoopAbortReport(job_id, aborted, trees)
