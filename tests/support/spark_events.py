"""Reading a Spark application's event log (``spark.eventLog.enabled`` with
``spark.eventLog.compress=false``): what really happened to its tasks and executors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def event_log(directory: Path, app_id: str | None = None) -> list[dict[str, Any]]:
    """Every event of every application (or of ``app_id``) logged under ``directory`` (JSON lines).

    Rolling logs are ``eventlog_v2_<app>/events_<n>_<app>``; checksums (``.*.crc``) and the
    ``appstatus_*`` marker are skipped.
    """
    events = []
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name.startswith((".", "appstatus_")) or path.name.endswith(".crc"):
            continue
        if app_id is not None and app_id not in str(path.relative_to(directory)):
            continue
        for line in path.read_text(errors="replace").splitlines():
            if line.strip():
                events.append(json.loads(line))
    return events


def task_starts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``TaskInfo`` of every SparkListenerTaskStart."""
    return [e["Task Info"] for e in events if e.get("Event") == "SparkListenerTaskStart"]
