"""Hourly cleanup of what failed and killed commit jobs leave behind, and a report of what it reclaimed.

Pending multipart uploads are billed yet invisible, and `_temporary`, `__magic*` and
`.spark-staging-*` trees pile up in table roots. For every table root this DAG aborts uploads
older than `older_than`, then deletes temporary trees with no writes for as long. Live jobs are
safe, however long they run: a job set up and not yet decided keeps its uploads and tree whatever
their age, within its own timeout (the `execution_timeout` its task recorded) or else 7 days (then
it is taken as abandoned), and a tree written to while the cleanup runs is left alone. A job past
its commit point keeps its uploads and tree whatever their age, since rolling it forward needs
them (the report counts both kinds: finish jobs past their commit point).

It also prunes the per-job commit records in each root's `_airflow_commit/` by a policy: a job's
files go once they are older than `records_older_than` (30 days by default), except the
`records_keep_newest` newest of those jobs (0 by default). Sensors and Airflow retries read them,
so they must outlive any sensor wait and any job: `records_older_than` may not be shorter than
`records_max_job_duration` (the longest a job runs, 7 days by default), or the run fails before
touching anything. A job whose commit is still being rolled forward keeps its records whatever
their age, and the jobs kept that lack a records index entry get one.

Table roots come from the run's `roots` param or else the Airflow Variable `commit_cleanup_roots`
(a JSON list such as `["s3://lake/warehouse/events", "s3://lake/warehouse/users"]`). Each root is
a directory: `s3://lake/out/dataset1` never touches `s3://lake/out/dataset10`. The minimum age is
the run's `older_than` param or else the Variable `commit_cleanup_older_than` (24h when neither
is set), so the scheduled runs can be tuned without editing this file. S3 access uses the
`aws_default` connection (`endpoint_url` in its extras for S3-compatible stores).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, Variable, task

from airflow_commit_provider.cleanup import as_timedelta, parse_scope, record_policy
from airflow_commit_provider.operators import (
    AbortMultipartUploadsOperator,
    CleanupTemporaryOperator,
    PruneCommitRecordsOperator,
)

ROOTS_VARIABLE = "commit_cleanup_roots"
OLDER_THAN_VARIABLE = "commit_cleanup_older_than"
DEFAULT_OLDER_THAN = "24h"
#: The run's `older_than`, else the Variable's, else 24h (rendered for each task that needs it).
OLDER_THAN = f"{{{{ params.older_than or var.value.get('{OLDER_THAN_VARIABLE}', '{DEFAULT_OLDER_THAN}') }}}}"
AWS_CONN_ID = "aws_default"


def _materialise(reports: Iterable[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The mapped tasks' reports; indexing within `len` avoids probing past the end of the XComs."""
    if reports is None:
        return []
    if hasattr(reports, "__len__") and hasattr(reports, "__getitem__"):
        return [reports[i] for i in range(len(reports))]  # type: ignore[index]
    return list(reports)


with DAG(
    dag_id="upload_cleanup",
    description="Abort stale multipart uploads and delete stale temporary trees under table roots",
    schedule="@hourly",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params={
        "roots": Param(
            [], type="array", description=f"Table roots; empty means the {ROOTS_VARIABLE} Variable"
        ),
        "older_than": Param(
            "",
            type="string",
            description=f"Minimum age: 90s, 15m, 6h, 2d; empty means the {OLDER_THAN_VARIABLE} Variable, else "
            f"{DEFAULT_OLDER_THAN}",
        ),
        "records_older_than": Param(
            "30d", type="string", description="Minimum age of the job records pruned: 30d, 12h"
        ),
        "records_keep_newest": Param(
            0,
            type="integer",
            minimum=0,
            description="Of the jobs older than that, how many of the newest to keep",
        ),
        "records_max_job_duration": Param(
            "7d",
            type="string",
            description="The longest a job runs; records_older_than may not be shorter (abort outcomes fence "
            "orphaned drivers)",
        ),
        "dry_run": Param(False, type="boolean", description="Report what would be reclaimed, change nothing"),
    },
    tags=["commit-protocols", "cleanup"],
    doc_md=__doc__,
) as dag:

    @task
    def table_roots(params: dict[str, Any] | None = None) -> list[str]:
        """The roots to clean, validated here so a bad entry fails this task with a clear message."""
        params = params or {}
        roots = params.get("roots") or Variable.get(ROOTS_VARIABLE, default=[], deserialize_json=True)
        if not isinstance(roots, list):
            raise ValueError(f"{ROOTS_VARIABLE}: expected a JSON list of table roots, got {roots!r}")
        older_than = params.get("older_than") or Variable.get(OLDER_THAN_VARIABLE, default=DEFAULT_OLDER_THAN)
        as_timedelta(older_than, "older_than")
        record_policy(
            params.get("records_older_than", "30d"),
            params.get("records_keep_newest", 0),
            params.get("records_max_job_duration", "7d"),
            arguments="records_",
        )
        return [str(parse_scope(root, argument=f"{ROOTS_VARIABLE}[{i}]")) for i, root in enumerate(roots)]

    roots = table_roots()
    # [START howto_operator_cleanup]
    common = {
        "aws_conn_id": AWS_CONN_ID,
        "older_than": OLDER_THAN,
        "dry_run": "{{ params.dry_run }}",
    }
    # Measuring costs one more request per upload, but the report's point is the bytes reclaimed.
    uploads = AbortMultipartUploadsOperator.partial(
        task_id="abort_stale_uploads", measure_sizes=True, **common
    ).expand(scope=roots)
    trees = CleanupTemporaryOperator.partial(task_id="clean_stale_temp_trees", **common).expand(scope=roots)
    records = PruneCommitRecordsOperator.partial(
        task_id="prune_commit_records",
        aws_conn_id=AWS_CONN_ID,
        older_than="{{ params.records_older_than }}",
        keep_newest="{{ params.records_keep_newest }}",
        max_job_duration="{{ params.records_max_job_duration }}",
        dry_run="{{ params.dry_run }}",
    ).expand(scope=roots)
    uploads >> trees
    # [END howto_operator_cleanup]

    @task(trigger_rule="none_failed")
    def report(
        upload_reports: Iterable[dict[str, Any]],
        tree_reports: Iterable[dict[str, Any]],
        record_reports: Iterable[dict[str, Any]],
    ) -> dict[str, Any]:
        """Sum what was reclaimed (bytes are what people want to see) and log it per root."""
        uploads_done, trees_done = _materialise(upload_reports), _materialise(tree_reports)
        records_done = _materialise(record_reports)
        summary = {
            "roots": len({r["scope"] for r in uploads_done + trees_done + records_done}),
            "dry_run": any(r["dry_run"] for r in uploads_done + trees_done + records_done),
            "uploads_aborted": sum(r["aborted"] + r["would_abort"] for r in uploads_done),
            "upload_bytes": sum(r["bytes"] for r in uploads_done),
            "uploads_vanished": sum(r["vanished"] for r in uploads_done),
            "uploads_kept_committing": sum(r["committing"] for r in uploads_done),
            "uploads_kept_live": sum(r["live"] for r in uploads_done),
            "trees_deleted": sum(r["deleted"] + r["would_delete"] for r in trees_done),
            "tree_files": sum(r["files"] for r in trees_done),
            "tree_bytes": sum(r["bytes"] for r in trees_done),
            "trees_active": sum(r["skipped_active"] for r in trees_done),
            "trees_kept_committing": sum(r["kept_committing"] for r in trees_done),
            "trees_kept_live": sum(r["kept_live"] for r in trees_done),
            "record_jobs_pruned": sum(r["pruned"] + r["would_prune"] for r in records_done),
            "record_bytes": sum(r["bytes"] for r in records_done),
            "record_jobs_kept_committing": sum(r["kept_committing"] for r in records_done),
            "record_jobs_kept_newest": sum(r["kept_newest"] for r in records_done),
            "record_jobs_indexed": sum(r["indexed"] for r in records_done),
        }
        summary["bytes_reclaimed"] = summary["upload_bytes"] + summary["tree_bytes"] + summary["record_bytes"]
        for r in uploads_done:
            print(f"{r['scope']}: {r['aborted'] + r['would_abort']} uploads, {r['bytes']} bytes")
        for r in trees_done:
            print(f"{r['scope']}: {r['deleted'] + r['would_delete']} temp trees, {r['bytes']} bytes")
        for r in records_done:
            print(f"{r['scope']}: records of {r['pruned'] + r['would_prune']} jobs, {r['bytes']} bytes")
        verb = "would reclaim" if summary["dry_run"] else "reclaimed"
        print(
            f"{verb} {summary['bytes_reclaimed']} bytes: {summary['uploads_aborted']} uploads, "
            f"{summary['trees_deleted']} temporary trees, records of {summary['record_jobs_pruned']} jobs "
            f"under {summary['roots']} roots"
        )
        return summary

    report(uploads.output, trees.output, records.output)


if __name__ == "__main__":
    dag.test()
