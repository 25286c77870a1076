"""CommittedSparkSubmitOperator writing a catalog table with a real spark-submit: a try whose driver
died between the commit point and registering the partitions is adopted by a retry, which
registers them with a registration-only Spark application.

The applications share an embedded Derby metastore in a temporary directory; Derby admits one
application at a time, and these run one after the other. The user's application is
table_write_app.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException
from support.spark_apps import LOCAL_APP_CONF
from support.task_instances import task_instance

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.devtools.hive_metastore import embedded_metastore_conf
from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
from airflow_commit_provider.operators import CommittedSparkSubmitOperator
from airflow_commit_provider.operators.registration import verified_or_registered
from airflow_commit_provider.operators.try_outcome import verify_success
from airflow_commit_provider.tries.plan import try_job_id

pytestmark = [pytest.mark.spark, pytest.mark.slow]

APP = Path(__file__).resolve().parent / "table_write_app.py"
TABLE = "default.events"
DAY = "2024-01-01"
KEY = TaskKey("ingest", "write", "manual__2024-01-01T00:00:00+00:00", -1)


def metastore_conf(directory: Path) -> dict[str, str]:
    """The conf of applications sharing the Derby metastore in `directory` (fast local JVMs)."""
    conf = {**LOCAL_APP_CONF, **embedded_metastore_conf(directory), "spark.sql.shuffle.partitions": "2"}
    options = (LOCAL_APP_CONF["spark.driver.extraJavaOptions"], conf["spark.driver.extraJavaOptions"])
    conf["spark.driver.extraJavaOptions"] = " ".join(options)
    return conf


def operator(destination: str, conf: dict[str, str], *, die: bool = False) -> CommittedSparkSubmitOperator:
    return CommittedSparkSubmitOperator(
        task_id=KEY.task_id,
        application=str(APP),
        application_args=["write", DAY, *(["--die-before-registering"] if die else [])],
        destination=destination,
        table=TABLE,
        committer="partitioned",
        conflict_mode="replace",
        conf=conf,
    )


def context(try_number: int) -> dict[str, Any]:
    ti = task_instance(
        dag_id=KEY.dag_id, task_id=KEY.task_id, run_id=KEY.run_id, map_index=-1, try_number=try_number
    )
    return {"ti": ti}


def read_table(conf: dict[str, str], out: Path) -> dict[str, Any]:
    """What a reader application sees of the table (a spark-submit of its own)."""
    CommittedSparkSubmitHook(conf=conf, application_args=["read", TABLE, str(out)]).submit(str(APP))
    return dict(json.loads(out.read_text()))


def operator_log(capsys: pytest.CaptureFixture[str]) -> str:
    """What the operator logged so far (Airflow's task logger writes to stdout outside a task runner)."""
    captured = capsys.readouterr()
    return captured.out + captured.err


def data_files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.glob("dt=*/part-*"))


def test_a_retry_registers_the_partitions_of_a_driver_killed_after_its_commit(
    tmp_path: Path, spark_default: None, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "events"
    destination = root.as_uri()
    conf = metastore_conf(tmp_path / "metastore")
    store, location = LocalStore(), StorePath.parse(destination)
    job = try_job_id(KEY, 1)

    # Try 1: the driver commits, then dies where it would register the day.
    with pytest.raises(AirflowException, match="Error code is: 86"):
        operator(destination, conf, die=True).execute(context(1))
    assert inspect_job(store, location, job).state is JobState.COMMITTED
    pending = load_job_record(store, location, job)
    assert pending.table == TABLE and pending.registration_pending
    written = data_files(root)
    assert written and all(name.startswith(f"dt={DAY}/") for name in written)

    # Try 2 adopts the job, but its registration application reaches another (empty) metastore,
    # which has no such table: the task fails in one line, and the data stays committed.
    wrong = metastore_conf(tmp_path / "other-metastore")
    with pytest.raises(AirflowException) as failed:
        operator(destination, wrong).execute(context(2))
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"registering the partitions of job {job} in table {TABLE} failed")
    assert "the data stays committed" in message
    assert data_files(root) == written
    assert load_job_record(store, location, job).registration_pending

    # Try 3 adopts the job again and registers its day; the task succeeds with that job's result.
    capsys.readouterr()
    summary = operator(destination, conf).execute(context(3))
    assert summary["job_id"] == job and summary["adopted_from_try"] == 1 and summary["try_number"] == 3
    assert summary["rows"] == 6 and summary["partitions"] == [f"dt={DAY}"]
    log = operator_log(capsys)
    assert "the operator submits a registration-only Spark application" in log
    assert f"Registered the partitions of job {job} in table {TABLE} (1): dt={DAY}" in log
    assert load_job_record(store, location, job).registered_partitions == [f"dt={DAY}"]
    assert inspect_job(store, location, job).delivered
    assert data_files(root) == written

    seen = read_table(conf, tmp_path / "seen.json")
    assert seen["partitions"] == [f"dt={DAY}"]
    assert seen["rows"] == [[index, DAY] for index in range(6)]
    assert seen["pruned"] == {DAY: 6}

    # Once registered, verifying again submits nothing.
    plan = operator(destination, conf).write_plan()

    def verify() -> SuccessData:
        return verify_success(store, plan, job, 0, logging.getLogger(__name__))

    def register(*_: Any) -> int:
        raise AssertionError("a registered job needs no registration application")

    again = verified_or_registered(verify, register, logging.getLogger(__name__))
    assert again.registered_partitions == [f"dt={DAY}"]
