"""The sensor and trigger fall back to a job's record when the table's `_SUCCESS` is another job's.

Tables are written by real committers: job-a writes day 1, then job-b writes day 2, so the
table's `_SUCCESS` names job-b and job-a is proven by `_airflow_commit/job-a.success.json`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import PokeReturnValue
from support.committed_jobs import COMMITTER, commit, set_up

from airflow_commit_provider.compat import AirflowException, AirflowFailException, AirflowSensorTimeout
from airflow_commit_provider.core.committers import resolve
from airflow_commit_provider.core.job_records import load_job_record, save_job_record
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.operators.try_outcome import verify_success
from airflow_commit_provider.sensors import SuccessManifestSensor
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.triggers import SuccessManifestTrigger


def sensor(path: StorePath | str, **kwargs: Any) -> SuccessManifestSensor:
    kwargs.setdefault("poke_interval", 0)
    kwargs.setdefault("timeout", 0)
    kwargs.setdefault("deferrable", False)
    return SuccessManifestSensor(task_id="wait", destination=str(path), **kwargs)


async def _first_event(trigger: SuccessManifestTrigger) -> Any:
    run = trigger.run()
    try:
        return (await run.__anext__()).payload
    finally:
        await run.aclose()


def first_event(trigger: SuccessManifestTrigger) -> Any:
    return asyncio.run(_first_event(trigger))


@pytest.fixture
def table(tmp_path: Path) -> StorePath:
    dest = StorePath.parse(str(tmp_path / "table"))
    commit(LocalStore(), dest, "job-a", ["dt=1"], files=2)
    commit(LocalStore(), dest, "job-b", ["dt=2"], files=3)
    return dest


def test_sensor_accepts_the_jobs_record_when_success_names_a_later_job(table: StorePath) -> None:
    result = sensor(table, job_id="job-a", committers="partitioned", required_partitions=["dt=1"]).poke({})
    assert isinstance(result, PokeReturnValue) and result.is_done
    summary = result.xcom_value
    assert (summary["job_id"], summary["source"], summary["path"]) == (
        "job-a",
        "job record",
        str(JobLayout(table, "job-a").job_record),
    )
    assert (summary["files"], summary["partitions"]) == (2, ["dt=1"])
    # The later job is proven by the _SUCCESS itself.
    latest = sensor(table, job_id="job-b", min_files=3).poke({})
    assert isinstance(latest, PokeReturnValue) and latest.xcom_value["source"] == "_SUCCESS"


def test_sensor_accepts_the_record_while_success_is_absent(table: StorePath) -> None:
    set_up(LocalStore(), table, "job-c")  # the next job's setup removes the table's _SUCCESS
    assert sensor(table, job_id="job-a").execute({})["source"] == "job record"
    op = sensor(table, job_id="job-c", timeout=0)
    with pytest.raises(AirflowSensorTimeout) as raised:
        op.execute({})
    assert "does not exist yet" in str(raised.value)
    assert f"no record of job 'job-c' at {JobLayout(table, 'job-c').job_record}" in str(raised.value)


def test_the_record_must_meet_every_expectation(table: StorePath) -> None:
    with pytest.raises(AirflowFailException) as raised:
        sensor(table, job_id="job-a", required_partitions=["dt=2"], fail_on_mismatch=True).execute({})
    assert f"{JobLayout(table, 'job-a').job_record} does not qualify: missing partitions: dt=2" in str(
        raised.value
    )


def test_a_job_with_neither_keeps_the_sensor_waiting_and_says_why(table: StorePath) -> None:
    op = sensor(table, job_id="job-zzz")
    assert op.poke({}) is False
    with pytest.raises(AirflowSensorTimeout) as raised:
        op.execute({})
    message = str(raised.value)
    assert "job ID is 'job-b', expected 'job-zzz'" in message
    assert f"no record of job 'job-zzz' at {JobLayout(table, 'job-zzz').job_record}" in message


def test_a_table_write_waits_until_its_partitions_are_registered(table: StorePath) -> None:
    """A table write's record says whether its partitions reached the catalog (core.catalog); the
    sensor passes only once they have, and says why it waits."""
    store = LocalStore()
    record = load_job_record(store, table, "job-a")
    save_job_record(store, table, replace(record, table="db.events"))
    op = sensor(table, job_id="job-a")
    assert op.poke({}) is False
    with pytest.raises(AirflowSensorTimeout, match=r"not yet registered in table db.events"):
        op.execute({})
    plan = resolve(COMMITTER, str(table), partition_columns=("dt",))
    with pytest.raises(
        AirflowException, match=r"^job job-a committed to .*not yet registered in table db\.events: "
    ):
        verify_success(store, plan, "job-a", 0, logging.getLogger(__name__))  # the operator's check
    save_job_record(store, table, replace(record, table="db.events", registered_partitions=["dt=1"]))
    assert sensor(table, job_id="job-a").execute({})["source"] == "job record"
    assert verify_success(store, plan, "job-a", 0, logging.getLogger(__name__)).job_id == "job-a"


BAD_RECORDS = [
    pytest.param(b"{truncated", "not valid JSON", id="corrupt"),
    pytest.param(
        b'{"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/2", "jobId": "job-x"}',
        "name is 'org.apache.hadoop.fs.s3a.commit.files.SuccessData/2'",
        id="foreign-version",
    ),
    pytest.param(b"", "job record is empty", id="empty"),
    pytest.param(None, "this is the record of job 'job-a', expected job 'job-x'", id="another-job"),
]


def _bad_record(table: StorePath, payload: bytes | None) -> StorePath:
    store = LocalStore()
    record = JobLayout(table, "job-x").job_record
    if payload is None:  # job-a's record, copied under job-x's name
        payload = store.read_bytes(JobLayout(table, "job-a").job_record)
    store.write_bytes(record, payload)
    return record


@pytest.mark.parametrize(("payload", "fragment"), BAD_RECORDS)
def test_a_bad_record_fails_the_sensor_naming_the_file(
    table: StorePath, payload: bytes | None, fragment: str
) -> None:
    record = _bad_record(table, payload)
    with pytest.raises(AirflowFailException) as raised:
        sensor(table, job_id="job-x", timeout=3600).execute({})
    assert str(record) in str(raised.value) and fragment in str(raised.value)
    assert "allow_legacy" not in str(raised.value), "an empty record is no legacy _SUCCESS"


@pytest.mark.parametrize(("payload", "fragment"), BAD_RECORDS)
def test_a_bad_record_ends_the_trigger_as_invalid(
    table: StorePath, payload: bytes | None, fragment: str
) -> None:
    record = _bad_record(table, payload)
    event = first_event(
        SuccessManifestTrigger(destination=str(table), expectations=SuccessExpectations(job_id="job-x"))
    )
    assert (event["status"], event["kind"]) == ("error", "invalid")
    assert str(record) in event["message"] and fragment in event["message"]


def test_trigger_falls_back_to_the_record(table: StorePath) -> None:
    expectations = SuccessExpectations(job_id="job-a", required_partitions=("dt=1",))
    event = first_event(SuccessManifestTrigger(destination=str(table), expectations=expectations))
    assert event["status"] == "success"
    assert (event["summary"]["job_id"], event["summary"]["source"]) == ("job-a", "job record")


def test_on_s3_the_fallback_costs_one_more_get(aws_default: EmbeddedS3, s3_bucket: str) -> None:
    store = aws_default.store()
    table = StorePath("s3", s3_bucket, "warehouse/events")
    commit(store, table, "job-a", ["dt=1"])
    commit(store, table, "job-b", ["dt=2"])
    op = sensor(table, job_id="job-b")
    assert op.poke({})
    assert op.store.statistics.snapshot() == {"op_get": 1}, "_SUCCESS names the job: one GET"
    op = sensor(table, job_id="job-a")
    result = op.poke({})
    assert isinstance(result, PokeReturnValue) and result.xcom_value["source"] == "job record"
    assert op.store.statistics.snapshot() == {"op_get": 2}, "_SUCCESS, then the job's record"
    store.close()
