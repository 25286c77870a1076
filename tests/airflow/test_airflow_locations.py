"""The location contract at the Airflow entry points: the sensor, the store hook and the CLI take a
location literally (`%41`, `%25`, `#`, `?`, spaces, unicode and `=` are part of the key), on S3
and on local files alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import PokeReturnValue

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.hooks import CommitStoreHook
from airflow_commit_provider.sensors import SuccessManifestSensor

TRICKY = "reports %41/k=50%25 #1?x/ünï day"


def commit_one_file(store: Store, location: str, committer: str) -> str:
    """A real job committing one file at `location`; returns its job ID."""
    job = create_committer(
        committer, store, location, f"job-{abs(hash(location)) % 10**8}", CommitOptions(threads=2)
    )
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    attempt.setup_task()
    with attempt.create_file("part-00000.bin") as stream:
        stream.write(b"one row\n")
    job.commit_job([attempt.commit_task(rows=1)])
    return job.job_id


def check_entry_points(location: str, job_id: str, store: Store, cli_args: list[str]) -> None:
    sensor = SuccessManifestSensor(
        task_id="wait", destination=location, job_id=job_id, poke_interval=0, timeout=0, deferrable=False
    )
    result: Any = sensor.poke({})
    assert isinstance(result, PokeReturnValue) and result.is_done, sensor
    assert result.xcom_value["job_id"] == job_id
    assert main(["success", "verify", location, "--job-id", job_id, *cli_args]) == 0
    literal = StorePath.parse(location)
    assert store.get_status(literal.join("part-00000.bin")) is not None


def test_local_locations_are_literal_everywhere(tmp_path: Path) -> None:
    location = f"{tmp_path}/{TRICKY}"
    store = LocalStore()
    job_id = commit_one_file(store, location, "manifest")
    assert (tmp_path / "reports %41" / "k=50%25 #1?x" / "ünï day" / "part-00000.bin").is_file()
    for given in (location, f"file://{location}"):
        check_entry_points(given, job_id, store, [])
    assert CommitStoreHook().get_store(location).get_status(StorePath.parse(location).join("_SUCCESS"))


@pytest.mark.s3
def test_s3_locations_are_literal_everywhere(
    aws_default: EmbeddedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = f"s3://{s3_bucket}/{TRICKY}"
    hook = CommitStoreHook(aws_conn_id="aws_default")
    store = hook.get_store(location)
    job_id = commit_one_file(store, location, "magic")
    keys = [entry["Key"] for entry in aws_default.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert f"{TRICKY}/part-00000.bin" in keys, keys
    for name, value in aws_default.env().items():  # the CLI follows boto3's environment
        monkeypatch.setenv(name, value)
    for given in (location, f"s3a://{s3_bucket}/{TRICKY}"):
        check_entry_points(given, job_id, store, ["--endpoint-url", aws_default.endpoint_url])
