"""A task instance as an operator's `execute` reads it from its context, for tests that call
`execute` directly (outside Airflow's task runner): its key fields, and XCom pushes kept in `.xcom`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def task_instance(**fields: Any) -> SimpleNamespace:
    """`fields` (dag_id, task_id, run_id, map_index, try_number) and an `xcom_push` that records."""
    pushed: dict[str, Any] = {}

    def xcom_push(key: str, value: Any) -> None:
        pushed[key] = value

    return SimpleNamespace(**fields, xcom=pushed, xcom_push=xcom_push)
