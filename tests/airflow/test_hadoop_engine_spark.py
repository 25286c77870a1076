"""engine="hadoop" with real Spark: Spark's own writer commits through Hadoop's classic committer.

This spark-submit runs PyPI's PySpark as a user gets it, without hadoop-aws or spark-hadoop-cloud
(``test_hadoop_engine_s3a.py`` runs those), so the JVM committer here is FileOutputCommitter v1 on
a local destination (``bind_commit_protocol=False``). Its `_SUCCESS` is the classic 0-byte marker:
the operator accepts it because it was written after this try started.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from support.task_instances import task_instance

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.operators import CommittedSparkSubmitOperator

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).resolve().parents[2] / "dags_examples" / "jobs" / "daily_ingest_job.py"


def test_classic_committer_through_spark(tmp_path: Path, spark_default: None) -> None:
    source = tmp_path / "events.csv"
    with source.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["event_id", "amount"])
        writer.writerows([f"e{i}", i * 1.5] for i in range(100))
    destination = StorePath.parse(str(tmp_path / "table"))
    op = CommittedSparkSubmitOperator(
        task_id="write",
        application=str(JOB),
        destination=f"file://{destination.key}",
        committer="file-v1",
        engine="hadoop",
        jvm_conf_options={"bind_commit_protocol": False},
        application_args=["--source", str(source), "--ds", "2024-01-01"],
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        },
    )
    summary: dict[str, Any] = op.execute({"ti": task_instance(try_number=1)})

    assert (tmp_path / "table" / "_SUCCESS").read_bytes() == b""
    assert summary["engine"] == "hadoop" and summary["job_id"] == summary["try_job_id"]
    files = sorted(p.name for p in (tmp_path / "table" / "dt=2024-01-01").glob("part-*.parquet"))
    assert len(files) == 2
    visible = sorted(p.name for p in (tmp_path / "table").iterdir() if not p.name.startswith("."))
    assert visible == ["_SUCCESS", "dt=2024-01-01"], "no _temporary left"  # (.crc files are Hadoop's)
