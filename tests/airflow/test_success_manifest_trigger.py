"""SuccessManifestTrigger: polling without blocking the event loop, and its events."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from support.success_files import JOB, put, success

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.triggers import SuccessManifestTrigger


async def first_event(trigger: SuccessManifestTrigger) -> Any:
    run = trigger.run()
    try:
        event = await run.__anext__()
    finally:
        await run.aclose()
    return event.payload


def _job(job_id: str) -> SuccessExpectations:
    return SuccessExpectations(job_id=job_id)


@pytest.fixture
def table(tmp_path: Path) -> StorePath:
    return StorePath.parse(str(tmp_path / "table"))


def test_serialize_round_trip(table: StorePath) -> None:
    expectations = SuccessExpectations.build(
        job_id=JOB,
        committers=["magic"],
        min_files=2,
        newer_than="2024-01-02T00:00:00+00:00",
        required_partitions=["dt=2024-01-01"],
        allow_legacy=True,
    )
    trigger = SuccessManifestTrigger(destination=str(table), poke_interval=7, expectations=expectations)
    classpath, kwargs = trigger.serialize()
    assert kwargs["expectations"] == {
        "job_id": JOB,
        "committers": ["magic"],
        "min_files": 2,
        "newer_than": "2024-01-02T00:00:00+00:00",
        "required_partitions": ["dt=2024-01-01"],
        "allow_legacy": True,
    }
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.expectations == expectations


def test_the_triggerer_recreates_it_from_what_airflow_stores(table: StorePath) -> None:
    """Through Airflow's own trigger row: kwargs encrypted and serialized, then read back as the triggerer does."""
    from airflow.models.trigger import Trigger

    expectations = SuccessExpectations.build(
        job_id=JOB, committers="magic", newer_than="2024-01-02T00:00:00Z", required_partitions="dt=1"
    )
    trigger = SuccessManifestTrigger(destination=str(table), expectations=expectations, fail_on_mismatch=True)
    row = Trigger.from_object(trigger)
    classpath, kwargs = trigger.serialize()
    assert row.classpath == classpath
    rebuilt = SuccessManifestTrigger(**row.kwargs)
    assert rebuilt.expectations == expectations
    assert rebuilt.serialize() == (classpath, kwargs)


def test_success_event(table: StorePath) -> None:
    put(LocalStore(), table, success(table))
    payload = asyncio.run(first_event(SuccessManifestTrigger(destination=str(table), expectations=_job(JOB))))
    assert payload["status"] == "success"
    assert payload["summary"]["job_id"] == JOB and payload["summary"]["files"] == 3


def test_polls_in_threads_until_the_file_qualifies(table: StorePath, monkeypatch: pytest.MonkeyPatch) -> None:
    """Missing, then yesterday's, then the awaited one; every check runs off the event loop."""
    local = LocalStore()
    original = SuccessExpectations.check
    calls: list[tuple[str, int]] = []

    def check(self: SuccessExpectations, store: Any, location: Any) -> Any:
        result = original(self, store, location)
        calls.append((result.state, threading.get_ident()))
        if len(calls) == 1:
            put(local, table, success(table, job_id="job-yesterday"))  # arrives while the trigger sleeps
        elif len(calls) == 2:
            put(local, table, success(table))
        return result

    monkeypatch.setattr(SuccessExpectations, "check", check)

    async def scenario() -> tuple[Any, int]:
        trigger = SuccessManifestTrigger(destination=str(table), expectations=_job(JOB), poke_interval=0)
        payload = await first_event(trigger)
        return payload, threading.get_ident()

    payload, loop_thread = asyncio.run(scenario())
    assert payload["status"] == "success" and payload["summary"]["job_id"] == JOB
    assert [state for state, _ in calls] == ["missing", "rejected", "accepted"]
    assert all(thread != loop_thread for _, thread in calls), "store calls must not block the event loop"


def test_legacy_marker_is_an_invalid_event(table: StorePath) -> None:
    put(LocalStore(), table, b"")
    payload = asyncio.run(first_event(SuccessManifestTrigger(destination=str(table))))
    assert payload["status"] == "error" and payload["kind"] == "invalid"
    assert "classic FileOutputCommitter" in payload["message"]


def test_corrupt_file_is_an_invalid_event(table: StorePath) -> None:
    put(LocalStore(), table, b"{oops")
    payload = asyncio.run(first_event(SuccessManifestTrigger(destination=str(table))))
    assert payload["kind"] == "invalid"


def test_mismatch_with_fail_on_mismatch_is_a_rejected_event(table: StorePath) -> None:
    put(LocalStore(), table, success(table))
    trigger = SuccessManifestTrigger(
        destination=str(table), expectations=SuccessExpectations(min_files=99), fail_on_mismatch=True
    )
    payload = asyncio.run(first_event(trigger))
    assert payload["kind"] == "rejected" and "expected at least 99" in payload["message"]


def test_store_failure_is_a_store_event(aws_default: EmbeddedS3) -> None:
    trigger = SuccessManifestTrigger(destination="s3://no-such-bucket-for-commit-tests/table")
    payload = asyncio.run(first_event(trigger))
    assert payload["status"] == "error" and payload["kind"] == "store"
    assert "no-such-bucket-for-commit-tests" in payload["message"]


def test_s3_through_the_aws_connection(aws_default: EmbeddedS3, s3_bucket: str) -> None:
    table = StorePath("s3", s3_bucket, "t")
    put(aws_default.store(), table, success(table))
    expectations = SuccessExpectations(committers=("partitioned",))
    payload = asyncio.run(
        first_event(SuccessManifestTrigger(destination=str(table), expectations=expectations))
    )
    assert payload["status"] == "success"
    assert payload["summary"]["path"] == f"s3://{s3_bucket}/t/_SUCCESS"


def test_invalid_arguments_fail_when_built(table: StorePath) -> None:
    with pytest.raises(ValueError, match="newer_than"):
        SuccessManifestTrigger(destination=str(table), expectations={"newer_than": "not a date"})
    with pytest.raises(TypeError, match="min_file"):
        SuccessManifestTrigger(destination=str(table), expectations={"min_file": 3})
