"""Operators that reclaim what failed jobs leave behind (pending uploads, temporary trees), and old job records.

They are thin over `cleanup`, which the CLI shares. The scope is validated before any
request (at DAG parse time when it is not templated), because a scope that is too broad is how
a cleanup once destroyed a neighbouring dataset. For OpenLineage each reports what it removed with
the lifecycle change DROP, named after the removed areas and never after the table
(:func:`airflow_commit_provider.lineage.removal_lineage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.operators.base_aws import AwsBaseOperator
from airflow.providers.amazon.aws.utils.mixins import aws_template_fields

from airflow_commit_provider import lineage
from airflow_commit_provider.cleanup import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_OLDER_THAN,
    DEFAULT_RECORDS_OLDER_THAN,
    abort_pending_uploads,
    as_timedelta,
    clean_stale_temp_trees,
    parse_scope,
    prune_old_records,
    record_policy,
)
from airflow_commit_provider.core.options import parse_bool
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.progress import PROGRESS_LOG_INTERVAL, LoggingProgress
from airflow_commit_provider.templating import is_template

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

    from airflow_commit_provider.cleanup import AbortReport, RecordPruneReport, TempCleanReport
    from airflow_commit_provider.cleanup.reports import CleanupReport
    from airflow_commit_provider.core.store import Store

__all__ = ["AbortMultipartUploadsOperator", "CleanupTemporaryOperator", "PruneCommitRecordsOperator"]


class _CleanupOperator(AwsBaseOperator[CommitStoreHook]):
    """The Amazon provider's operator arguments (``aws_conn_id``, ``region_name``, ``verify``,
    ``botocore_config``) and templating, over a :class:`CommitStoreHook`.

    Memory does not grow with what is cleaned (a million uploads or files): listings are spooled
    on the worker's local disk, and the returned report holds counts, bytes and a sample.

    :param threads: requests in flight.
    :param sample_size: names of removed items in the returned report (at most 200).
    :param progress_interval: seconds between progress lines (counts and rate) in the task log.
    """

    aws_hook_class = CommitStoreHook
    # `dry_run` is kept as `dry_run_flag`: an attribute `dry_run` would hide `BaseOperator.dry_run()`.
    template_fields: Sequence[str] = aws_template_fields("scope", "older_than", "job_id", "dry_run_flag")

    def __init__(
        self,
        *,
        scope: str,
        older_than: str | float | timedelta = DEFAULT_OLDER_THAN,
        job_id: str | None = None,
        dry_run: bool | str = False,
        allow_bucket_root: bool = False,
        threads: int = 16,
        sample_size: int = 20,
        progress_interval: float = PROGRESS_LOG_INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scope = scope
        self.older_than = older_than
        self.job_id = job_id
        self.dry_run_flag = dry_run
        self.allow_bucket_root = allow_bucket_root
        self.threads = threads
        self.sample_size = sample_size
        self.progress_interval = progress_interval
        # What this try did, for OpenLineage.
        self._report: CleanupReport[Any, Any] | None = None
        # Fail at DAG parse time when nothing is left to render.
        if not is_template(scope):
            parse_scope(scope, argument="scope", allow_bucket_root=allow_bucket_root)
        if not is_template(older_than):
            as_timedelta(older_than, "older_than")
        if not is_template(dry_run):
            parse_bool(dry_run, "dry_run")

    def execute(self, context: Context) -> dict[str, Any]:
        """Clean with a store of this task's own, log what was reclaimed, fail if anything failed.

        Every item is tried before the task fails, so one bad item does not shield the others.
        """
        scope, age, job_id, dry_run = self._resolve()
        self._report = None
        store = self._store(scope)
        progress = LoggingProgress(self.log, self.progress_interval)
        try:
            report = self._clean(
                store,
                scope,
                older_than=age,
                job_id=job_id,
                dry_run=dry_run,
                allow_bucket_root=self.allow_bucket_root,
                threads=self.threads,
                progress=progress,
            )
        finally:
            progress.close()
            store.close()
        report.close()  # its counts and kept outcomes stay; the local spools go
        self._report = report
        self.log.info("%s", report.describe())
        failure = report.failure_message()
        if failure:
            raise RuntimeError(failure)
        return report.to_json(sample=self.sample_size)

    def _resolve(self) -> tuple[StorePath, timedelta, str | None, bool]:
        """The rendered arguments, checked again: templates can render to anything."""
        scope = parse_scope(self.scope, argument="scope", allow_bucket_root=self.allow_bucket_root)
        age = as_timedelta(self.older_than, "older_than")
        return scope, age, (self.job_id or None), parse_bool(self.dry_run_flag, "dry_run")

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """What was removed, as datasets with the lifecycle change DROP."""
        return lineage.removal_lineage(self._report)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        """What was removed before some items failed: the task fails only after trying them all."""
        return self.get_openlineage_facets_on_complete(task_instance)

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        return {**super()._hook_parameters, "threads": self.threads}

    def _store(self, scope: StorePath) -> Store:
        return self.hook.get_store(scope)

    def _clean(self, store: Store, scope: StorePath, **options: Any) -> CleanupReport[Any, Any]:
        """Find and remove (or, dry, report) what this operator cleans under `scope`."""
        raise NotImplementedError


class AbortMultipartUploadsOperator(_CleanupOperator):
    """Abort pending multipart uploads under `scope` (a directory) older than `older_than`.

    Uploads are billed but invisible; those of failed or killed jobs stay forever. Uploads of a job
    past its commit point (to be rolled forward) are never aborted, however old, nor (unless
    `job_id` names it) those of a live job: set up, undecided, and set up less than its own timeout
    (the ``execution_timeout`` its task recorded) or else `max_job_duration` ago. Each upload
    gets one abort; the scope is then listed again and uploads still pending are aborted again.
    An upload that vanished meanwhile (NoSuchUpload) is counted, not an error; any other failure
    fails the task after all others were tried. Returns a small report (counts, bytes, sample keys).

    :param scope: `s3://bucket/prefix` (templated); the bucket root needs `allow_bucket_root`.
    :param older_than: `90s`, `15m`, `6h`, `2d`, seconds or a timedelta (templated; default 24 h).
    :param job_id: only uploads of that job (templated).
    :param max_job_duration: how long an undecided job that recorded no timeout stays live after its
        setup (templated; default 7 days).
    :param dry_run: report what would be aborted and change nothing.
    :param measure_sizes: measure each upload's parts and bytes first (one ListParts per upload,
        which doubles the requests). None (the default) measures only in a dry run; unmeasured,
        the report's `bytes` and `parts` are null.
    """

    template_fields: Sequence[str] = (*_CleanupOperator.template_fields, "max_job_duration")
    ui_color = "#f4d9c6"

    def __init__(
        self,
        *,
        measure_sizes: bool | None = None,
        max_job_duration: str | float | timedelta = DEFAULT_MAX_JOB_DURATION,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.measure_sizes = measure_sizes
        self.max_job_duration = max_job_duration
        if not is_template(max_job_duration):
            as_timedelta(max_job_duration, "max_job_duration")  # refused at DAG parse time

    def _clean(self, store: Store, scope: StorePath, **options: Any) -> AbortReport:
        return abort_pending_uploads(
            store, scope, sizes=self.measure_sizes, max_job_duration=self.max_job_duration, **options
        )


class CleanupTemporaryOperator(_CleanupOperator):
    """Delete stale temporary trees (`_temporary`, `__magic*`, `.spark-staging-*`) in a table root.

    A tree is stale when its newest write is older than `older_than`; trees with recent writes,
    or written to while the cleanup runs, belong to live jobs and are left alone, and so are the
    trees of jobs past their commit point (rolling them forward needs them), however old, and
    (unless `job_id` names it) of a live job: set up, undecided, and set up less than its own
    timeout or else `max_job_duration` ago. Nothing outside those trees is touched. Works on
    `s3://` and `file://`. Returns counts, bytes, sample trees.

    :param scope: the table root (templated); the bucket root needs `allow_bucket_root`.
    :param nested: also look for trees below the scope's subdirectories (lists everything).
    :param max_job_duration: how long an undecided job that recorded no timeout stays live after its
        setup (templated; default 7 days).
    """

    template_fields: Sequence[str] = (*_CleanupOperator.template_fields, "max_job_duration")
    ui_color = "#e6dcf4"

    def __init__(
        self,
        *,
        nested: bool = False,
        max_job_duration: str | float | timedelta = DEFAULT_MAX_JOB_DURATION,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.nested = nested
        self.max_job_duration = max_job_duration
        if not is_template(max_job_duration):
            as_timedelta(max_job_duration, "max_job_duration")  # refused at DAG parse time

    def _clean(self, store: Store, scope: StorePath, **options: Any) -> TempCleanReport:
        return clean_stale_temp_trees(
            store, scope, nested=self.nested, max_job_duration=self.max_job_duration, **options
        )


class PruneCommitRecordsOperator(_CleanupOperator):
    """Delete the per-job records in `<scope>/_airflow_commit/` by a policy: every job younger than
    `older_than` stays, and of the older ones the `keep_newest` newest.

    Each committed or aborted job leaves its outcome, its records index entry, its record, its
    file and partition lists and perhaps a delivery marker there; sensors (of parallel backfills)
    and Airflow retries read them, so keep them longer than any sensor waits or any job runs: 30
    days by default. An abort outcome fences an orphaned driver, so `older_than` may not be shorter
    than `max_job_duration`, the longest a job runs (7 days unless given): such a policy is refused.
    A job's files go together and only when the newest of them is older than `older_than`; a job
    whose commit is still being rolled forward (an outcome saying commit, no record yet) keeps them,
    and so does one whose outcome cannot be read. Files written while the operator runs are left
    alone. The jobs kept that lack a records index entry get one. Returns counts, bytes and sample
    job IDs.

    :param scope: the destination (table root) whose records to prune (templated).
    :param older_than: `30d`, `12h`, seconds or a timedelta (templated; default 30 days).
    :param keep_newest: of the jobs older than `older_than`, how many of the newest to keep too
        (templated; default 0).
    :param max_job_duration: the longest a job runs, setup to decision (templated; default 7 days).
    :param job_id: only that job's records (templated).
    """

    template_fields: Sequence[str] = (*_CleanupOperator.template_fields, "keep_newest", "max_job_duration")
    ui_color = "#dce9f4"

    def __init__(
        self,
        *,
        older_than: str | float | timedelta = DEFAULT_RECORDS_OLDER_THAN,
        keep_newest: int | str = 0,
        max_job_duration: str | float | timedelta = DEFAULT_MAX_JOB_DURATION,
        **kwargs: Any,
    ) -> None:
        super().__init__(older_than=older_than, **kwargs)
        self.keep_newest = keep_newest
        self.max_job_duration = max_job_duration
        if not any(is_template(value) for value in (older_than, keep_newest, max_job_duration)):
            record_policy(older_than, keep_newest, max_job_duration)  # refused at DAG parse time

    def _clean(self, store: Store, scope: StorePath, **options: Any) -> RecordPruneReport:
        return prune_old_records(
            store, scope, keep_newest=self.keep_newest, max_job_duration=self.max_job_duration, **options
        )
