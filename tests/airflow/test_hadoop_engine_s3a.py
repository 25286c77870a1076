"""engine="hadoop" end to end: a DAG run whose spark-submit writes through S3A's magic committer.

A real ``dag.test()`` run, a real spark-submit (local Spark with hadoop-aws and spark-hadoop-cloud
on its classpath) writing ``s3a://`` on the embedded S3, credentials from the Airflow connection
reaching the job through its environment only. The operator verifies S3A's JSON `_SUCCESS`, the
sensor the day's partition; the table then holds exactly the landed rows and nothing else. The
task's "Commit report" link and report target lead to that commit's report, read from S3A's
`_SUCCESS` (Hadoop's committers keep no records of ours).
"""

from __future__ import annotations

import copy
import csv
import io
import json
from datetime import datetime, timezone
from typing import Any

import pyarrow.parquet as pq
import pytest
from dag_runs import load_dag, run_dag, task_instances, xcom

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import MAGIC_PREFIX
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.operators.report_link import CommitReportLink
from airflow_commit_provider.report.addresses import REPORT_TARGET_XCOM, task_page
from airflow_commit_provider.report.commit_report import load_commit

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.hadoop_peers]

DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_s3a_magic_committer_in_a_dag(
    airflow_db: Any, aws_default: EmbeddedS3, spark_default: None, s3_bucket: str
) -> None:
    store = aws_default.store()
    landed = io.StringIO()
    writer = csv.writer(landed)
    writer.writerow(["event_id", "amount"])
    writer.writerows([f"e{i}", i * 1.5] for i in range(100))
    source = StorePath.parse(f"s3://{s3_bucket}/landing/events.csv")
    store.write_bytes(source, landed.getvalue().encode())
    table = StorePath.parse(f"s3a://{s3_bucket}/events")

    dag = load_dag("test_hadoop_engine_s3a")
    rendered = copy.copy(dag.get_task("write"))
    rendered.destination = str(table)
    conf = rendered.job_conf("job-1", 1)  # what spark-submit gets as --conf: where S3 is, never who
    assert conf["spark.hadoop.fs.s3a.endpoint"] == aws_default.endpoint_url
    assert aws_default.secret_key not in json.dumps(conf) and aws_default.access_key not in json.dumps(conf)
    dagrun = run_dag(dag, DAY, {"destination": str(table), "source": str(source)})

    states = {task_id: ti.state for task_id, ti in task_instances(dagrun).items()}
    assert states == {"write": "success", "verify": "success"}
    written = xcom(dagrun, "write")
    assert (written["engine"], written["committer"], written["files"]) == ("hadoop", "magic", 2)
    assert written["job_id"] == written["try_job_id"], "S3A records the try's job ID"
    assert xcom(dagrun, "verify")["partitions"] == ["dt=2024-01-01"]

    success = SuccessData.from_bytes(store.read_bytes(table.join("_SUCCESS")), str(table))
    assert (success.committer, success.job_id, success.job_id_source) == (
        "magic",
        written["job_id"],
        "fs.s3a.committer.uuid",
    )
    data = [s.path for s in store.list_files(table) if s.path.name.startswith("part-")]
    assert sorted(f"/{path.key}" for path in data) == sorted(success.filenames)
    assert {path.parent.name for path in data} == {"dt=2024-01-01"}
    rows = sum(pq.read_table(io.BytesIO(store.read_bytes(path))).num_rows for path in data)
    assert rows == 100
    target = xcom(dagrun, "write", REPORT_TARGET_XCOM)
    assert target == {"destination": str(table), "aws_conn_id": "aws_default", "job_id": written["job_id"]}
    link = xcom(dagrun, "write", CommitReportLink().xcom_key)
    assert link == task_page("test_hadoop_engine_s3a", dagrun.run_id, "write"), link
    report = load_commit(store, target["destination"], target["job_id"])
    assert (report.summary.committer, report.summary.files, report.from_success) == ("magic", 2, True)
    assert sorted(f.uri for f in report.files_page) == sorted(path.uri() for path in data)

    leftovers = [s.path.relative_to(table) for s in store.list_files(table) if MAGIC_PREFIX in s.path.key]
    assert leftovers == [] and list(store.list_multipart_uploads(table)) == []
    store.close()
