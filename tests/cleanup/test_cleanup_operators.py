"""The cleanup operators (called directly) and the hourly example DAG."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cleanup_support import ExampleDagRun, keys_under, start_upload, write_files
from support.aws_arguments import CA_BUNDLE, REGION, TEMPLATED_AWS_ARGUMENTS, render_aws_arguments
from support.committed_jobs import commit, interrupt_after_commit_point
from support.openlineage import lineage_events

from airflow_commit_provider.core.job_control import inspect_job
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.operators import (
    AbortMultipartUploadsOperator,
    CleanupTemporaryOperator,
    PruneCommitRecordsOperator,
)

DAG_FILE = Path(__file__).resolve().parents[2] / "dags_examples" / "upload_cleanup.py"


@pytest.mark.parametrize(
    "operator", [AbortMultipartUploadsOperator, CleanupTemporaryOperator, PruneCommitRecordsOperator]
)
@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ("s3://", "no bucket"),
        ("s3:bucket/x", "cannot parse"),
        ("ftp://host/x", "unsupported scheme"),
        ("s3://bucket", "allow_bucket_root"),
        ("s3://bucket/", "allow_bucket_root"),
        ("", "empty scope"),
    ],
)
def test_bad_scopes_fail_at_definition(operator: type, scope: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^scope: .*{message}"):
        operator(task_id="cleanup", scope=scope)


def test_templated_scope_is_checked_after_rendering() -> None:
    op = AbortMultipartUploadsOperator(
        task_id="abort", scope="s3://{{ params.bucket }}", older_than="{{ x }}"
    )
    assert set(op.template_fields) == {
        "scope",
        "older_than",
        "job_id",
        "dry_run_flag",
        "aws_conn_id",
        "region_name",
        "verify",
        "max_job_duration",
    }
    op.scope, op.older_than = "s3://lake", "1h"  # what rendering an empty prefix gives
    with pytest.raises(ValueError, match=r"^scope: .*empty prefix"):
        op.execute(context={})
    op.scope, op.older_than = "s3://lake/t", "soon"
    with pytest.raises(ValueError, match=r"^older_than: invalid duration 'soon'"):
        op.execute(context={})
    with pytest.raises(ValueError, match=r"^older_than"):
        CleanupTemporaryOperator(task_id="clean", scope="s3://lake/t", older_than="5 parsecs")


@pytest.mark.s3
def test_abort_operator_reports_counts_bytes_and_sample(
    aws_test_conn: str, s3_store: S3Store, s3_bucket: str
) -> None:
    table = StorePath("s3", s3_bucket, "lake/events")
    for i in range(25):
        start_upload(s3_store, table.join(f"day={i % 3}/part-{i:03d}"), size=100)
    neighbour = start_upload(s3_store, StorePath("s3", s3_bucket, "lake/events10/part-0"))
    scope = f"s3://{s3_bucket}/lake/events"

    dry = AbortMultipartUploadsOperator(task_id="dry", scope=scope, older_than="0s", dry_run=True)
    report = dry.execute(context={})
    assert (report["would_abort"], report["aborted"], report["bytes"]) == (25, 0, 2500)
    assert len(list(s3_store.list_multipart_uploads(table))) == 25

    op = AbortMultipartUploadsOperator(
        task_id="abort",
        scope=scope,
        older_than=timedelta(0),
        aws_conn_id=aws_test_conn,
        sample_size=5,
        measure_sizes=True,
    )
    report = op.execute(context={})
    assert (report["aborted"], report["bytes"], report["parts"], report["failed"]) == (25, 2500, 25, 0)
    assert len(report["sample"]) == 5 and all(k.startswith("lake/events/") for k in report["sample"])
    json.dumps(report)  # XCom-safe
    assert list(s3_store.list_multipart_uploads(table)) == []
    assert [u.upload_id for u in s3_store.list_multipart_uploads(table.parent)] == [neighbour]
    # Default threshold (24 h): a fresh upload is left alone.
    start_upload(s3_store, table.join("fresh"))
    assert AbortMultipartUploadsOperator(task_id="a", scope=scope).execute(context={})["too_recent"] == 1


@pytest.mark.s3
def test_abort_operator_measures_sizes_only_in_dry_runs_unless_asked(
    aws_test_conn: str, s3_store: S3Store, s3_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = StorePath("s3", s3_bucket, "lake/t")
    for i in range(3):
        start_upload(s3_store, table.join(f"f{i}"), parts=2, size=10)
    scope, age = f"s3://{s3_bucket}/lake/t", "0s"

    def run(**options: object) -> dict[str, Any]:
        return AbortMultipartUploadsOperator(task_id="a", scope=scope, older_than=age, **options).execute({})

    assert run(dry_run=True)["bytes"] == 60
    assert run(dry_run=True, measure_sizes=False)["bytes"] is None
    report = run()
    assert (report["aborted"], report["sizes_measured"], report["bytes"], report["parts"]) == (
        3,
        False,
        None,
        None,
    )
    logged = capsys.readouterr().out  # the task logger (structlog) writes to stdout here
    assert f"Aborted 3 uploads older than 0s under {scope}: sizes not measured" in logged, logged
    assert "measure_sizes=True" in logged
    assert list(s3_store.list_multipart_uploads(table)) == []


@pytest.mark.s3
def test_cleanup_operator_on_s3(aws_test_conn: str, s3_store: S3Store, s3_bucket: str) -> None:
    table = StorePath("s3", s3_bucket, "lake/events")
    write_files(s3_store, table, ["_temporary/j1/00/f", ".spark-staging-j2/f", "data/part-0", "_SUCCESS"])
    op = CleanupTemporaryOperator(task_id="clean", scope=f"s3://{s3_bucket}/lake/events", older_than="0s")
    report = op.execute(context={})
    assert (report["deleted"], report["files"], report["bytes"]) == (2, 2, 20)
    assert keys_under(s3_store, table) == {"data/part-0", "_SUCCESS"}


@pytest.mark.s3
@pytest.mark.parametrize(
    "operator", [AbortMultipartUploadsOperator, CleanupTemporaryOperator, PruneCommitRecordsOperator]
)
def test_operators_take_and_template_the_amazon_providers_aws_arguments(
    operator: type, aws_test_conn: str, s3_store: S3Store, s3_bucket: str
) -> None:
    """aws_conn_id, region_name and verify are templated and botocore_config is not, as in the
    Amazon provider's operators; all of them reach the store the operator cleans with."""
    from airflow.providers.amazon.aws.operators.base_aws import AwsBaseOperator

    table = StorePath("s3", s3_bucket, "lake/events")
    write_files(s3_store, table, ["_temporary/j1/00/f"])
    op = operator(
        task_id="clean",
        scope=f"s3://{s3_bucket}/lake/events",
        older_than="0s",
        dry_run=True,
        threads=3,
        botocore_config={"connect_timeout": 7},
        **TEMPLATED_AWS_ARGUMENTS,
        **({"max_job_duration": "0s"} if operator is PruneCommitRecordsOperator else {}),
    )
    assert isinstance(op, AwsBaseOperator)
    render_aws_arguments(op, aws_test_conn)
    assert op.hook.threads == 3
    store = op._store(table)
    assert isinstance(store, S3Store)
    assert (store.region_name, store.verify) == (REGION, CA_BUNDLE)
    assert store.client.meta.config.connect_timeout == 7
    store.close()
    report = op.execute(context={})  # a dry run through those settings, against the real store
    assert report["dry_run"] is True and report["failed"] == 0
    assert keys_under(s3_store, table) == {"_temporary/j1/00/f"}


def test_cleanup_operator_on_local_files_needs_no_connection(tmp_path: Path) -> None:
    store, root = LocalStore(), StorePath.parse(str(tmp_path / "table"))
    write_files(store, root, ["__magic_job-x/a", "data/part-0"])
    report = CleanupTemporaryOperator(
        task_id="clean", scope=f"file://{root.key}", older_than="0s", aws_conn_id=None, dry_run="true"
    ).execute(context={})
    assert (report["would_delete"], report["dry_run"]) == (1, True)
    report = CleanupTemporaryOperator(task_id="clean", scope=root.key, older_than=0).execute(context={})
    assert report["deleted"] == 1 and keys_under(store, root) == {"data/part-0"}


def test_the_dry_run_argument_leaves_the_operators_dry_run_method_alone(tmp_path: Path) -> None:
    """`dry_run=` is templated, and `BaseOperator.dry_run()` (which renders nothing, only logs the
    template fields) stays callable: an attribute of that name used to hide it."""
    store, root = LocalStore(), StorePath.parse(str(tmp_path / "table"))
    write_files(store, root, ["__magic_job-x/a"])
    op = CleanupTemporaryOperator(
        task_id="clean", scope=root.key, older_than="0s", dry_run="{{ params.dry }}"
    )
    op.dry_run()
    op.render_template_fields({"params": {"dry": "true"}})
    report = op.execute(context={})
    assert (report["would_delete"], report["dry_run"]) == (1, True)
    assert keys_under(store, root) == {"__magic_job-x/a"}


def test_prune_records_operator_keeps_young_and_committing_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, root = LocalStore(), StorePath.parse(str(tmp_path / "table"))
    commit(store, root, "job-a")
    interrupt_after_commit_point(store, root, "job-c")
    records = root.join("_airflow_commit")
    before = keys_under(store, records)
    op = PruneCommitRecordsOperator(task_id="prune", scope=root.key, aws_conn_id=None)
    assert op.older_than == timedelta(days=30), "records are kept a month unless told otherwise"
    report = op.execute(context={})
    assert (report["pruned"], report["kept_recent"], report["kept_committing"]) == (0, 2, 0)
    # job-c's driver died before its index entry; the prune indexed the job it kept.
    entry = JobLayout(root, "job-c").index_entry(inspect_job(store, root, "job-c").outcome.timestamp)
    assert report["indexed"] == 1 and keys_under(store, records) == before | {entry.relative_to(records)}
    with pytest.raises(ValueError, match=r"^older_than: 0s is shorter than max_job_duration 7d: "):
        PruneCommitRecordsOperator(task_id="prune", scope=root.key, older_than="0s")
    op = PruneCommitRecordsOperator(
        task_id="prune", scope=f"file://{root.key}", older_than="0s", max_job_duration="0s"
    )
    report = op.execute({})
    assert (report["pruned"], report["kept_committing"], report["sample"]) == (1, 1, ["job-a"])
    job_c_lists = {key for key in before if key.startswith("job-c/")}
    assert job_c_lists, "job-c's file list, written before its commit point"
    assert keys_under(store, records) == {"job-c.outcome.json", entry.relative_to(records), *job_c_lists}
    assert "job-a" in "".join(keys_under(store, root)), "the output stays"
    json.dumps(report)  # XCom-safe
    logged = capsys.readouterr().out  # the task logger (structlog) writes to stdout here
    assert "Pruned the records of 1 jobs older than 0s" in logged and "1 committing" in logged


def test_example_dag_imports() -> None:
    from airflow_commit_provider.compat import dag_bag_class

    DagBag = dag_bag_class()

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    dag = bag.dags["upload_cleanup"]
    assert set(dag.task_ids) == {
        "table_roots",
        "abort_stale_uploads",
        "clean_stale_temp_trees",
        "prune_commit_records",
        "report",
    }
    # Airflow 3.3's repr shows the cron expression, 3.2's the preset, 3.1's only its summary.
    described = f"{dag.timetable!r} {getattr(dag.timetable, 'summary', '')}"
    assert dag.catchup is False and any(hourly in described for hourly in ("0 * * * *", "@hourly"))
    # A run's `roots` param wins over the Variable (the one DAG run, conftest.py's
    # `example_dag_run`, takes its roots from the Variable): the task asks for no Variable then.
    table_roots = dag.task_dict["table_roots"].python_callable
    roots = table_roots(params={"roots": ["s3://lake/out/dataset1/", "s3a://lake/t"], "older_than": "0s"})
    assert roots == ["s3://lake/out/dataset1", "s3a://lake/t"]
    with pytest.raises(ValueError, match=r"commit_cleanup_roots\[1\]"):
        table_roots(params={"roots": ["s3://lake/t", "s3://lake"], "older_than": "0s"})


@pytest.mark.s3
@pytest.mark.airflow
@pytest.mark.slow
def test_example_dag_reclaims_and_reports(example_dag_run: ExampleDagRun) -> None:
    """The run over lake/t1 (an old upload, a done job, a job past its commit point), lake/t2 (a
    stale tree) and the lineage test's out/dataset1 (conftest.py's `example_dag_run`)."""
    run, store, bucket = example_dag_run.run, example_dag_run.store, example_dag_run.bucket
    t1, t2 = example_dag_run.map_index["lake/t1"], example_dag_run.map_index["lake/t2"]
    assert run.state == "success"
    states = {(ti.task_id, ti.map_index): ti.state for ti in run.get_task_instances()}
    assert set(states.values()) == {"success"} and len(states) == 11, "table_roots, 3 x 3 mapped, report"
    assert sorted(u.path.key for u in store.list_multipart_uploads(example_dag_run.path("lake"))) == [
        "lake/t1/dt=9/part-job-committing.csv",
        "lake/t10/part-0",
    ], "the upload of the job past its commit point stays, however old"
    assert keys_under(store, example_dag_run.path("lake/t2")) == {"data/f"}
    assert {
        key.split("/")[0] if key.startswith(("_index/", "job-committing/")) else key
        for key in keys_under(store, example_dag_run.path("lake/t1/_airflow_commit"))
    } == {"job-committing.outcome.json", "job-committing", "_index"}, (
        "the done job's files went; the commit in progress kept its decision"
    )
    assert keys_under(store, example_dag_run.path("lake/t10")) == example_dag_run.outside["lake/t10"]
    summary = next(ti for ti in run.get_task_instances() if ti.task_id == "report").xcom_pull(
        task_ids="report"
    )
    # Summed over the roots: lake/t1's one upload (2000 B) and lake/t2's tree (10 B), and out/dataset1's
    # two uploads (3000 B), five trees (50 B) and one done job.
    assert summary["roots"] == 3
    assert summary["uploads_aborted"] == 1 + 2 and summary["upload_bytes"] == 2000 + 3000
    assert summary["trees_deleted"] == 1 + 5 and summary["tree_bytes"] == 10 + 50
    assert (summary["uploads_kept_committing"], summary["trees_kept_committing"]) == (1, 1)
    assert (summary["uploads_kept_live"], summary["trees_kept_live"]) == (0, 0)
    assert summary["record_jobs_pruned"] == 1 + 1 and summary["record_jobs_kept_committing"] == 1
    assert summary["record_jobs_indexed"] == 1, "the job whose driver died before its entry was indexed"
    assert summary["bytes_reclaimed"] == 5060 + summary["record_bytes"] and summary["record_bytes"] > 0

    # OpenLineage: each task's DROP names what it removed, never its table.
    def dropped(task_id: str, map_index: int) -> dict[str, Any]:
        [dataset] = lineage_events(run.run_id, task_id, map_index)["COMPLETE"]["inputs"]
        assert dataset["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
        assert dataset["namespace"] == f"s3://{bucket}"
        return dataset

    uploads = dropped("abort_stale_uploads", t1)
    assert uploads["name"] == "lake/t1/_pending_uploads"
    assert uploads["inputFacets"]["subset"]["inputCondition"]["locations"] == ["lake/t1/day=1/part-0"]
    statistics = uploads["inputFacets"]["inputStatistics"]
    assert (statistics["size"], statistics["fileCount"]) == (2000, 1)
    trees = dropped("clean_stale_temp_trees", t2)
    assert trees["name"] == "lake/t2/_temporary/j" and "subset" not in trees["inputFacets"]
    statistics = trees["inputFacets"]["inputStatistics"]
    assert (statistics["size"], statistics["fileCount"]) == (10, 1)
    records = dropped("prune_commit_records", t1)
    assert records["name"] == "lake/t1/_airflow_commit"
    locations = records["inputFacets"]["subset"]["inputCondition"]["locations"]
    assert len(locations) == 4 and all(
        name.startswith(("lake/t1/_airflow_commit/job-done.", "lake/t1/_airflow_commit/job-done/files-"))
        or name.endswith("-job-done.json")
        for name in locations
    ), "job-done's outcome, record, file list and index entry"
    reported = [
        dataset["name"]
        for task_id in ("abort_stale_uploads", "clean_stale_temp_trees", "prune_commit_records")
        for map_index in example_dag_run.map_index.values()
        for event in lineage_events(run.run_id, task_id, map_index).values()
        for dataset in event["inputs"] + event["outputs"]
    ]
    assert reported and not {"lake/t1", "lake/t2", "out/dataset1"} & set(reported), (
        "a live table is never dropped"
    )
    assert all(name.startswith(("lake/t1/", "lake/t2/", "out/dataset1/")) for name in reported), (
        "nor lake/t10 or out/dataset10"
    )
    assert lineage_events(run.run_id, "abort_stale_uploads", t2)["COMPLETE"]["inputs"] == [], (
        "t2 had no uploads"
    )
