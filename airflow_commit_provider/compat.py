"""Names that moved between the Airflow versions the provider supports (3.1 to 3.3), in one place.

Airflow 3.1's Task SDK has no `conf` and lacks some exceptions; its `DagBag` lives in
`airflow.models`. Every module takes these names from here, so supporting or dropping a version
is one edit.
"""

from __future__ import annotations

from typing import Any

try:
    from airflow.sdk import conf
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSensorTimeout
except ImportError:  # Airflow 3.1: the configuration and these exceptions are not in the Task SDK yet
    # mypy sees the newest Airflow: there this fallback's parser is another class of the same interface.
    from airflow.configuration import conf  # type: ignore[assignment]
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowException,
        AirflowFailException,
        AirflowSensorTimeout,
    )

try:
    from airflow.sdk import CronDataIntervalTimetable
except ImportError:  # Airflow 3.1: timetables are not in the Task SDK yet
    # As for `conf`: the core timetable, not the Task SDK's class of the same name.
    from airflow.timetables.interval import CronDataIntervalTimetable  # type: ignore[assignment]

__all__ = [
    "AirflowException",
    "AirflowFailException",
    "AirflowSensorTimeout",
    "CronDataIntervalTimetable",
    "conf",
    "dag_bag_class",
]


def dag_bag_class() -> Any:
    """Airflow's `DagBag`, imported only when asked for (it loads the scheduler's models)."""
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 3.1
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]
    return DagBag
