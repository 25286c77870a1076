"""A try whose table write committed while its partitions were not registered finishes the
registration itself, with the registration-only application, on the embedded S3.

The real SparkSubmitHook runs the fake `spark-submit` (fake_spark_submit.py): its driver commits
the job with the table in its record and no catalog to register in, as a driver whose registration
failed after the commit point and whose application still exited 0; given the registration-only
application, it registers through the core's ``register_committed``. What reaches the catalog and
the command line is checked here; test_committed_spark_submit_tables.py runs the real thing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException
from fake_spark import FakeSpark, install_fake_spark
from support.task_instances import task_instance

from airflow_commit_provider.core.job_control import inspect_job
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
from airflow_commit_provider.tries.plan import try_job_id

pytestmark = pytest.mark.s3

KEY = TaskKey("ingest", "write", "manual__2024-01-01T00:00:00+00:00", -1)
TABLE = "lake.events"
USER_CONF = {"spark.sql.shuffle.partitions": "4"}


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_default: None) -> FakeSpark:
    fake = install_fake_spark(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_SPARK_PARTITION", "dt=2024-01-01")
    monkeypatch.setenv("FAKE_SPARK_CATALOG", str(tmp_path / "catalog.json"))
    return fake


@pytest.fixture
def destination(aws_default: EmbeddedS3, s3_bucket: str) -> Iterator[tuple[Store, StorePath]]:
    store = aws_default.store()
    yield store, StorePath("s3", s3_bucket, "tables/events")
    store.close()


def write(destination: StorePath, try_number: int) -> dict[str, Any]:
    op = CommittedSparkSubmitOperator(
        task_id=KEY.task_id,
        application="/jobs/app.py",
        application_args=["--day", "2024-01-01"],
        destination=str(destination),
        table=TABLE,
        committer="partitioned",
        conflict_mode="replace",
        conf=USER_CONF,
    )
    ti = task_instance(
        dag_id=KEY.dag_id, task_id=KEY.task_id, run_id=KEY.run_id, map_index=-1, try_number=try_number
    )
    return dict(op.execute({"ti": ti}))


def test_a_try_registers_what_its_driver_committed_but_did_not_register(
    fake_spark: FakeSpark, destination: tuple[Store, StorePath], aws_default: EmbeddedS3
) -> None:
    store, location = destination
    job = try_job_id(KEY, 1)
    summary = write(location, 1)

    assert summary["job_id"] == job and summary["partitions"] == ["dt=2024-01-01"]
    assert load_job_record(store, location, job).registered_partitions == ["dt=2024-01-01"]
    assert inspect_job(store, location, job).delivered
    asked = json.loads((fake_spark.directory / "catalog.json").read_text())
    assert asked == {TABLE: [[["dt", "2024-01-01"], f"{location}/dt=2024-01-01"]]}

    registration = fake_spark.record()  # the last spark-submit: the registration application
    assert Path(registration["application"]).name == "finish_registration.py"
    assert registration["args"] == [str(location), TABLE, job]
    assert registration["options"]["name"] == "airflow-commit-spark-registration"
    assert registration["confs"] == USER_CONF, "the user's conf, none of the write's job confs"
    assert ".zip" in registration["package_file"], "the package came from the shipped zip"
    assert registration["env"]["AWS_SECRET_ACCESS_KEY"] == aws_default.secret_key
    assert aws_default.secret_key not in " ".join(registration["argv"])


def test_a_failed_registration_fails_the_try_and_its_retry_registers(
    fake_spark: FakeSpark, destination: tuple[Store, StorePath], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, location = destination
    job = try_job_id(KEY, 1)
    monkeypatch.setenv("FAKE_SPARK_REGISTRATION", "fail")
    with pytest.raises(AirflowException) as failed:
        write(location, 1)
    assert str(failed.value) == (
        f"registering the partitions of job {job} in table {TABLE} failed (the registration-only "
        f"Spark application exited with code 1; its log is above): the data stays committed in "
        f"{location}, and a retry of this task registers them"
    )
    record = load_job_record(store, location, job)
    assert record.registration_pending and record.partitions == ["dt=2024-01-01"]
    assert not (fake_spark.directory / "catalog.json").exists()

    monkeypatch.delenv("FAKE_SPARK_REGISTRATION")
    summary = write(location, 2)
    assert summary["job_id"] == job and summary["adopted_from_try"] == 1
    assert fake_spark.record()["args"] == [str(location), TABLE, job], "the retry ran only the registration"
    assert load_job_record(store, location, job).registered_partitions == ["dt=2024-01-01"]
