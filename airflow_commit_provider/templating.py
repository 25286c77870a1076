"""Airflow's templating as operators see it at DAG parse time.

Apart from ``core`` (which ships to Spark executors and knows nothing of Jinja): an argument that
Airflow will still render cannot be checked when the DAG is parsed, only when the task runs.
"""

from __future__ import annotations


def is_template(value: object) -> bool:
    """An operator argument still to be rendered by Airflow: it cannot be checked or used at parse time."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)
