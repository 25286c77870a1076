"""The sensor run by Airflow itself (dag.test): deferrable through its trigger, and reschedule mode."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

import pytest
from dag_runs import load_dag, run_dag, task_instances, xcom
from support.success_files import JOB, put, success

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.success.check import SuccessExpectations

DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


def writes_success_on_call(monkeypatch: pytest.MonkeyPatch, call: int, write: Any) -> list[tuple[str, bool]]:
    """Record every check (state, in the main thread?) and write `_SUCCESS` right after check `call`."""
    original = SuccessExpectations.check
    calls: list[tuple[str, bool]] = []

    def check(self: SuccessExpectations, store: Any, location: Any) -> Any:
        result = original(self, store, location)
        calls.append((result.state, threading.current_thread() is threading.main_thread()))
        if len(calls) == call:
            write()
        return result

    monkeypatch.setattr(SuccessExpectations, "check", check)
    return calls


def test_deferrable_sensor_runs_through_its_trigger(
    airflow_db: Any, aws_default: EmbeddedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = StorePath("s3", s3_bucket, "warehouse/events")
    store = aws_default.store()
    # The worker's check before deferring (1) and the trigger's first poll (2) find nothing; then it lands.
    calls = writes_success_on_call(monkeypatch, 2, lambda: put(store, table, success(table)))
    dagrun = run_dag(
        load_dag("test_success_sensor_deferrable"), DAY, {"destination": str(table), "job_id": JOB}
    )
    assert task_instances(dagrun)["wait"].state == "success"
    assert [state for state, _ in calls] == ["missing", "missing", "accepted"]
    assert calls[0][1] and not calls[1][1] and not calls[2][1], "the trigger polls off the main thread"
    summary = xcom(dagrun, "wait")
    assert summary["job_id"] == JOB and summary["path"] == f"{table}/_SUCCESS"
    assert aws_default.secret_key not in repr(summary)


def test_reschedule_sensor_gives_its_slot_back(
    airflow_db: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_commit_provider.core.store.local import LocalStore

    table = StorePath.parse(str(tmp_path / "table"))
    calls = writes_success_on_call(monkeypatch, 1, lambda: put(LocalStore(), table, success(table)))
    dagrun = run_dag(
        load_dag("test_success_sensor_reschedule"), DAY, {"destination": str(table), "job_id": JOB}
    )
    ti = task_instances(dagrun)["wait"]
    assert ti.state == "success"
    assert [state for state, _ in calls] == ["missing", "accepted"]
    assert ti.try_number == 1, "a reschedule is not a retry"
    assert xcom(dagrun, "wait")["job_id"] == JOB
