"""Operators that reclaim what failed jobs leave behind: pending uploads and temporary trees.

They are thin over `core.cleanup`, which the CLI shares. The scope is validated before any
request (at DAG parse time when it is not templated), because a scope that is too broad is how
a cleanup once destroyed a neighbouring dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_commit_provider.core.cleanup import (
    DEFAULT_OLDER_THAN,
    abort_pending_uploads,
    as_timedelta,
    clean_stale_temp_trees,
    format_duration,
    parse_scope,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.hooks.commit_store import CommitStoreHook

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_commit_provider.core.store import Store

__all__ = ["AbortMultipartUploadsOperator", "CleanupTemporaryOperator"]


def _is_template(value: object) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _as_bool(value: object, argument: str) -> bool:
    """A flag that may arrive rendered from a template as text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "", "none"):
        return False
    raise ValueError(f"{argument}: expected true or false, got {value!r}")


class _CleanupOperator(BaseOperator):
    template_fields: Sequence[str] = ("scope", "older_than", "job_id", "dry_run")

    def __init__(
        self,
        *,
        scope: str,
        aws_conn_id: str | None = "aws_default",
        older_than: str | float | timedelta = DEFAULT_OLDER_THAN,
        job_id: str | None = None,
        dry_run: bool | str = False,
        allow_bucket_root: bool = False,
        threads: int = 16,
        sample_size: int = 20,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scope = scope
        self.older_than = older_than
        self.job_id = job_id
        self.aws_conn_id = aws_conn_id
        self.dry_run = dry_run
        self.allow_bucket_root = allow_bucket_root
        self.threads = threads
        self.sample_size = sample_size
        # Fail at DAG parse time when nothing is left to render.
        if not _is_template(scope):
            parse_scope(scope, argument="scope", allow_bucket_root=allow_bucket_root)
        if not _is_template(older_than):
            as_timedelta(older_than, "older_than")
        if not _is_template(dry_run):
            _as_bool(dry_run, "dry_run")

    def _resolve(self) -> tuple[StorePath, timedelta, str | None, bool]:
        """The rendered arguments, checked again: templates can render to anything."""
        path = parse_scope(self.scope, argument="scope", allow_bucket_root=self.allow_bucket_root)
        age = as_timedelta(self.older_than, "older_than")
        return path, age, (self.job_id or None), _as_bool(self.dry_run, "dry_run")

    def _store(self, path: StorePath) -> Store:
        return CommitStoreHook(aws_conn_id=self.aws_conn_id, threads=self.threads).get_store(path)


class AbortMultipartUploadsOperator(_CleanupOperator):
    """Abort pending multipart uploads under `scope` (a directory) older than `older_than`.

    Uploads are billed but invisible; those of failed or killed jobs stay forever. An upload
    that vanished meanwhile (NoSuchUpload) is counted, not an error; any other failure fails
    the task after all others were tried. Returns a small report (counts, bytes, sample keys).

    :param scope: `s3://bucket/prefix` (templated); the bucket root needs `allow_bucket_root`.
    :param older_than: `90s`, `15m`, `6h`, `2d`, seconds or a timedelta (templated; default 24 h).
    :param job_id: only uploads of that job (templated).
    :param dry_run: report what would be aborted and change nothing.
    """

    ui_color = "#f4d9c6"

    def execute(self, context: Context) -> dict[str, Any]:
        path, age, job_id, dry_run = self._resolve()
        store = self._store(path)
        try:
            report = abort_pending_uploads(
                store,
                path,
                older_than=age,
                job_id=job_id,
                dry_run=dry_run,
                allow_bucket_root=self.allow_bucket_root,
                threads=self.threads,
            )
        finally:
            store.close()
        result = report.to_json(sample=self.sample_size)
        verb = "would abort" if dry_run else "aborted"
        self.log.info(
            "%s: %s %d uploads older than %s (%d bytes in %d parts); %d vanished meanwhile, "
            "%d too recent, %d of other jobs, %d failed",
            path,
            verb,
            result["would_abort"] if dry_run else result["aborted"],
            format_duration(age.total_seconds()),
            result["bytes"],
            result["parts"],
            result["vanished"],
            result["too_recent"],
            result["other_jobs"],
            result["failed"],
        )
        if report.failed:
            first = report.failed[0]
            raise RuntimeError(
                f"{len(report.failed)} of {len(report.outcomes)} uploads under {path} could not be "
                f"aborted; first: {first.upload.path} ({first.error})"
            )
        return result


class CleanupTemporaryOperator(_CleanupOperator):
    """Delete stale temporary trees (`_temporary`, `__magic*`, `.spark-staging-*`) in a table root.

    A tree is stale when its newest write is older than `older_than`; trees with recent writes,
    or written to while the cleanup runs, belong to live jobs and are left alone. Nothing outside
    those trees is touched. Works on `s3://` and `file://`. Returns counts, bytes, sample trees.

    :param scope: the table root (templated); the bucket root needs `allow_bucket_root`.
    :param nested: also look for trees below the scope's subdirectories (lists everything).
    """

    ui_color = "#e6dcf4"

    def __init__(self, *, nested: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nested = nested

    def execute(self, context: Context) -> dict[str, Any]:
        path, age, job_id, dry_run = self._resolve()
        store = self._store(path)
        try:
            report = clean_stale_temp_trees(
                store,
                path,
                older_than=age,
                job_id=job_id,
                nested=self.nested,
                allow_bucket_root=self.allow_bucket_root,
                dry_run=dry_run,
                threads=self.threads,
            )
        finally:
            store.close()
        result = report.to_json(sample=self.sample_size)
        self.log.info(
            "%s: %s %d stale temporary trees older than %s (%d files, %d bytes, %d uploads aborted); "
            "%d active left alone, %d failed",
            path,
            "would delete" if dry_run else "deleted",
            result["would_delete"] if dry_run else result["deleted"],
            format_duration(age.total_seconds()),
            result["files"],
            result["bytes"],
            result["uploads_aborted"],
            result["skipped_active"],
            result["failed"],
        )
        if report.failed:
            first = report.failed[0]
            raise RuntimeError(
                f"{len(report.failed)} temporary trees under {path} could not be deleted; "
                f"first: {first.tree.path} ({first.error})"
            )
        return result
