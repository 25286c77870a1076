"""SuccessManifestSensor: waiting for `_SUCCESS`, every reason to refuse one, and the three modes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from airflow.sdk import PokeReturnValue

from airflow_commit_provider.compat import AirflowFailException, AirflowSensorTimeout

try:
    from airflow.sdk.exceptions import AirflowRescheduleException, AirflowSkipException, TaskDeferred
except ImportError:  # Airflow 3.1
    from airflow.exceptions import AirflowRescheduleException, AirflowSkipException, TaskDeferred
from support.aws_arguments import CA_BUNDLE, REGION, TEMPLATED_AWS_ARGUMENTS, render_aws_arguments
from support.success_files import JOB, put, success

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.sensors import SuccessManifestSensor
from airflow_commit_provider.triggers import SuccessManifestTrigger


def sensor(path: StorePath | str, **kwargs: Any) -> SuccessManifestSensor:
    kwargs.setdefault("poke_interval", 0)
    kwargs.setdefault("timeout", 0)
    kwargs.setdefault("deferrable", False)
    return SuccessManifestSensor(
        task_id=f"wait_{abs(hash(str(kwargs))) % 10**8}", destination=str(path), **kwargs
    )


@pytest.fixture
def table(tmp_path: Path) -> StorePath:
    return StorePath.parse(str(tmp_path / "table"))


@pytest.fixture
def local() -> LocalStore:
    return LocalStore()


# Waiting and accepting ------------------------------------------------------------------------
def test_missing_then_present(table: StorePath, local: LocalStore) -> None:
    op = sensor(table, job_id=JOB)
    assert op.poke({}) is False
    put(local, table, success(table))
    result = op.poke({})
    assert isinstance(result, PokeReturnValue) and result.is_done
    summary = result.xcom_value
    assert summary["job_id"] == JOB
    assert summary["committer"] == "partitioned"
    assert summary["files"] == 3 and summary["bytes"] == 300 and summary["rows"] == 30
    assert summary["partitions"] == ["dt=2024-01-01"] and summary["partition_count"] == 1
    assert summary["path"] == str(table.join("_SUCCESS"))
    assert "files" not in summary or isinstance(summary["files"], int)  # never the file list


def test_accepts_the_success_file_itself_and_file_urls(table: StorePath, local: LocalStore) -> None:
    put(local, table, success(table))
    assert sensor(table.join("_SUCCESS")).poke({})
    assert sensor(f"file://{table.key}").poke({})


def test_every_expectation_met(table: StorePath, local: LocalStore) -> None:
    put(local, table, success(table))
    op = sensor(
        table,
        job_id=JOB,
        committers=["magic", "partitioned"],
        min_files=3,
        newer_than=datetime.now(timezone.utc) - timedelta(minutes=5),
        required_partitions=["dt=2024-01-01"],
    )
    assert op.poke({})


def test_execute_returns_summary_as_xcom(table: StorePath, local: LocalStore) -> None:
    put(local, table, success(table))
    assert sensor(table, job_id=JOB).execute({})["job_id"] == JOB


def test_real_committer_output_on_s3(aws_default: EmbeddedS3, s3_bucket: str) -> None:
    """A job committed by a real committer on S3 satisfies the sensor.

    A poke costs one GET once `_SUCCESS` names the job; while it is absent, two (the job's record too).
    """
    destination = StorePath("s3", s3_bucket, "tables/events")
    store = aws_default.store()
    committer = create_committer("magic", store, destination, "job-real", CommitOptions(threads=2))
    committer.setup_job()
    op = sensor(destination, job_id="job-real", committers="magic", min_files=2)
    assert op.poke({}) is False
    assert op.store.statistics.snapshot() == {"op_get": 2}, "_SUCCESS, then the job's record"
    results = []
    for task in range(2):
        attempt = committer.task_attempt(task, 0)
        with attempt.create_file(f"part-{task}.csv") as stream:
            stream.write(b"a,b\n1,2\n")
        results.append(attempt.commit_task(rows=1))
    assert op.poke({}) is False  # tasks committed, job not yet: still no _SUCCESS
    committer.commit_job(results)
    result = op.poke({})
    assert isinstance(result, PokeReturnValue) and result.is_done
    assert result.xcom_value["files"] == 2 and result.xcom_value["rows"] == 2
    assert op.store.statistics.snapshot() == {"op_get": 5}, "the accepting poke costs exactly one request"


# Every reason to refuse -----------------------------------------------------------------------
REJECTIONS = [
    pytest.param({"job_id": "job-other"}, {}, "job ID is 'job-0001', expected 'job-other'", id="job-id"),
    pytest.param(
        {"committers": ["magic"]}, {}, "committer is 'partitioned', expected 'magic'", id="committer"
    ),
    pytest.param({"min_files": 10}, {}, "3 files committed, expected at least 10", id="min-files"),
    pytest.param(
        {"newer_than": "2099-01-01T00:00:00+00:00"}, {}, "not after 2099-01-01T00:00:00+00:00", id="stale"
    ),
    pytest.param(
        {"required_partitions": ["dt=2024-01-02"]}, {}, "missing partitions: dt=2024-01-02", id="partitions"
    ),
    pytest.param({}, {"success": False, "state": "failed"}, "did not succeed", id="not-successful"),
]


@pytest.mark.parametrize(("expect", "written", "reason"), REJECTIONS)
def test_rejection_keeps_waiting_and_times_out_with_the_reason(
    table: StorePath, local: LocalStore, expect: dict[str, Any], written: dict[str, Any], reason: str
) -> None:
    put(local, table, success(table, **written))
    op = sensor(table, **expect)
    assert op.poke({}) is False, "a valid but non-matching _SUCCESS is not (yet) the awaited one"
    with pytest.raises(AirflowSensorTimeout) as raised:
        op.execute({})
    assert reason in str(raised.value)


@pytest.mark.parametrize(("expect", "written", "reason"), REJECTIONS)
def test_rejection_fails_at_once_with_fail_on_mismatch(
    table: StorePath, local: LocalStore, expect: dict[str, Any], written: dict[str, Any], reason: str
) -> None:
    put(local, table, success(table, **written))
    with pytest.raises(AirflowFailException, match="does not qualify") as raised:
        sensor(table, fail_on_mismatch=True, timeout=3600, **expect).execute({})
    assert reason in str(raised.value)


def test_yesterdays_success_does_not_satisfy_today(table: StorePath, local: LocalStore) -> None:
    yesterday = datetime(2024, 1, 2, tzinfo=timezone.utc)
    put(local, table, success(table, timestamp=int((yesterday - timedelta(hours=1)).timestamp() * 1000)))
    op = sensor(table, newer_than="{{ data_interval_end }}")
    op.render_template_fields({"data_interval_end": yesterday})  # rendered as a datetime
    assert op.poke({}) is False
    op = sensor(table, newer_than=str(yesterday))  # rendered as a string: "2024-01-02 00:00:00+00:00"
    assert op.poke({}) is False
    put(local, table, success(table, timestamp=int((yesterday + timedelta(hours=1)).timestamp() * 1000)))
    assert op.poke({})


def test_legacy_marker_fails_naming_the_classic_committer(table: StorePath, local: LocalStore) -> None:
    put(local, table, b"")
    op = sensor(table, timeout=3600)
    with pytest.raises(AirflowFailException, match="classic FileOutputCommitter") as raised:
        op.execute({})
    assert "allow_legacy=True" in str(raised.value)


def test_legacy_marker_allowed_explicitly(table: StorePath, local: LocalStore) -> None:
    put(local, table, b"")
    result = sensor(table, allow_legacy=True, newer_than="2000-01-01T00:00:00Z").poke({})
    assert isinstance(result, PokeReturnValue) and result.xcom_value["legacy"] is True
    # ...but it can never prove a job ID, committer or partition.
    assert sensor(table, allow_legacy=True, job_id=JOB).poke({}) is False


def test_legacy_marker_with_soft_fail_skips(table: StorePath, local: LocalStore) -> None:
    put(local, table, b"")
    with pytest.raises(AirflowSkipException):
        sensor(table, soft_fail=True, timeout=3600).execute({})


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"{not json", "not a valid SuccessData"),
        (b'{"name": "something.Else/1"}', "expected 'org.apache.hadoop.fs.s3a.commit.files.SuccessData/1'"),
        (b"[1, 2]", "not a valid SuccessData"),
    ],
    ids=["corrupt", "wrong-name", "not-an-object"],
)
def test_not_success_data_fails(table: StorePath, local: LocalStore, payload: bytes, match: str) -> None:
    put(local, table, payload)
    with pytest.raises(AirflowFailException, match=match):
        sensor(table, timeout=3600).execute({})


def test_bad_arguments_fail_before_any_request(table: StorePath) -> None:
    with pytest.raises(ValueError, match="newer_than"):
        sensor(table, newer_than="yesterday-ish").execute({})
    with pytest.raises(ValueError, match="unsupported scheme"):
        sensor("gs://bucket/table").execute({})


# Modes -----------------------------------------------------------------------------------------
def test_reschedule_mode_gives_the_slot_back(table: StorePath, local: LocalStore) -> None:
    ti = mock.Mock()
    ti.get_first_reschedule_date.return_value = None
    op = sensor(table, mode="reschedule", poke_interval=60, timeout=3600)
    with pytest.raises(AirflowRescheduleException):
        op.execute({"ti": ti})
    put(local, table, success(table))
    assert op.execute({"ti": ti})["job_id"] == JOB


def test_deferrable_defers_to_the_trigger_with_everything_it_needs(table: StorePath) -> None:
    op = sensor(
        table,
        deferrable=True,
        poke_interval=5,
        timeout=600,
        job_id=JOB,
        committers="partitioned",
        min_files=1,
        newer_than="2024-01-02T00:00:00+00:00",
        required_partitions=["dt=2024-01-01"],
        aws_conn_id="my_aws",
    )
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, SuccessManifestTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == timedelta(seconds=600)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_commit_provider.triggers.success_manifest.SuccessManifestTrigger"
    assert kwargs == {
        "destination": str(table),
        "aws_conn_id": "my_aws",
        "region_name": None,
        "verify": None,
        "botocore_config": None,
        "poke_interval": 5.0,
        "expectations": {
            "job_id": JOB,
            "committers": ["partitioned"],
            "min_files": 1,
            "newer_than": "2024-01-02T00:00:00+00:00",
            "required_partitions": ["dt=2024-01-01"],
            "allow_legacy": False,
        },
        "fail_on_mismatch": False,
    }


def test_deferrable_returns_at_once_when_already_there(table: StorePath, local: LocalStore) -> None:
    put(local, table, success(table))
    assert sensor(table, deferrable=True)
    assert sensor(table, deferrable=True).execute({})["job_id"] == JOB


def test_execute_complete_maps_events() -> None:
    op = sensor("/tmp/x", deferrable=True)
    assert op.execute_complete({}, {"status": "success", "summary": {"job_id": "j"}}) == {"job_id": "j"}
    with pytest.raises(AirflowFailException, match="classic"):
        op.execute_complete({}, {"status": "error", "kind": "invalid", "message": "classic marker"})
    with pytest.raises(AirflowFailException, match="qualify"):
        op.execute_complete({}, {"status": "error", "kind": "rejected", "message": "does not qualify"})
    with pytest.raises(Exception, match="throttled") as raised:
        op.execute_complete({}, {"status": "error", "kind": "store", "message": "throttled"})
    assert not isinstance(raised.value, AirflowFailException), "store errors may be retried"


def test_deferrable_follows_default_deferrable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert SuccessManifestSensor(task_id="a", destination="/tmp/x").deferrable is True
    assert SuccessManifestSensor(task_id="b", destination="/tmp/x", deferrable=False).deferrable is False
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    assert SuccessManifestSensor(task_id="c", destination="/tmp/x").deferrable is False


def test_templated_fields() -> None:
    assert set(SuccessManifestSensor.template_fields) >= {
        "destination",
        "job_id",
        "committers",
        "min_files",
        "newer_than",
        "required_partitions",
    }
    op = SuccessManifestSensor(
        task_id="t",
        destination="s3://b/{{ params.table }}",
        job_id="{{ ti_job }}",
        required_partitions=["dt={{ ds }}"],
        newer_than="{{ data_interval_end }}",
    )
    end = datetime(2024, 1, 2, tzinfo=timezone.utc)
    op.render_template_fields(
        {"params": {"table": "events"}, "ti_job": "j1", "ds": "2024-01-01", "data_interval_end": end}
    )
    assert op.destination == "s3://b/events"
    assert op.job_id == "j1"
    assert op.required_partitions == ["dt=2024-01-01"]
    assert op._expectations().newer_than == end


def test_aws_arguments_are_the_amazon_providers_and_reach_the_store(
    aws_default: EmbeddedS3, s3_bucket: str
) -> None:
    """aws_conn_id, region_name and verify are templated and botocore_config is not, as in the
    Amazon provider's sensors; a poke goes through a store with all of them."""
    from airflow.providers.amazon.aws.sensors.base_aws import AwsBaseSensor

    from airflow_commit_provider.core.store.s3 import S3Store

    op = sensor(
        f"s3://{s3_bucket}/tables/events", botocore_config={"read_timeout": 9}, **TEMPLATED_AWS_ARGUMENTS
    )
    assert isinstance(op, AwsBaseSensor)
    render_aws_arguments(op, "aws_default")
    assert op.poke({}) is False  # nothing committed yet: answered by the real store
    store = op.store
    assert isinstance(store, S3Store)
    assert (store.region_name, store.verify, store.max_pool_connections) == (REGION, CA_BUNDLE, 5)
    assert store.client.meta.config.read_timeout == 9
    assert store.statistics.snapshot() == {"op_get": 1}


def test_a_deferred_sensor_hands_its_aws_arguments_to_the_triggerer(
    aws_default: EmbeddedS3, s3_bucket: str
) -> None:
    """The trigger the triggerer re-creates from Airflow's own trigger row opens the store the
    sensor would: the same region, CA bundle and botocore options, not the connection's alone."""
    from airflow.models.trigger import Trigger

    from airflow_commit_provider.core.store.s3 import S3Store
    from airflow_commit_provider.triggers.success_manifest import SuccessManifestTrigger

    op = sensor(
        f"s3://{s3_bucket}/tables/events", botocore_config={"read_timeout": 9}, **TEMPLATED_AWS_ARGUMENTS
    )
    render_aws_arguments(op, "aws_default")
    row = Trigger.from_object(op._trigger())
    rebuilt = SuccessManifestTrigger(**row.kwargs)
    store = rebuilt._open_store()
    try:
        assert isinstance(store, S3Store)
        assert (store.region_name, store.verify) == (REGION, CA_BUNDLE)
        assert store.client.meta.config.read_timeout == 9
    finally:
        store.close()
