"""The real OpenLineage provider, recording to a file: its configuration, and reading the events back.

The provider reads its configuration once per process (and enables its listener only if a
transport is configured), so the test conftests set it in the environment before Airflow is
imported. ``execute_in_thread`` emits from a thread of the test process instead of a fork of it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

TRANSPORT_ENV = "AIRFLOW__OPENLINEAGE__TRANSPORT"


def openlineage_file_transport(home: Path) -> dict[str, str]:
    """The environment that sends every OpenLineage event to ``<home>/openlineage.jsonl``."""
    transport = {"type": "file", "log_file_path": str(home / "openlineage.jsonl"), "append": True}
    return {TRANSPORT_ENV: json.dumps(transport), "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True"}


def lineage_events(run_id: str, task_id: str, map_index: int | None = None) -> dict[str, dict[str, Any]]:
    """The task's events in the DAG run `run_id`, by event type (START, COMPLETE, FAIL); the last of each."""
    path = Path(json.loads(os.environ[TRANSPORT_ENV])["log_file_path"])
    events: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        event = json.loads(line)
        airflow = event["run"]["facets"].get("airflow", {})
        run = airflow.get("dagRun", {})
        task = airflow.get("task", {}).get("task_id")
        index = airflow.get("taskInstance", {}).get("map_index")
        if run.get("run_id") == run_id and task == task_id and index == map_index:
            events[event["eventType"]] = event
    return events
