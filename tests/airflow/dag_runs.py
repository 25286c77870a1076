"""Running DAGs with `dag.test()` in the tests and reading back what they did."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any


def load_dag(dag_id: str) -> Any:
    """The DAG as dag.test() will find it: parsed from the test DAG folder (a DAG bundle)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def run_dag(dag: Any, logical_date: datetime, run_conf: dict[str, Any] | None = None) -> Any:
    return dag.test(logical_date=logical_date, run_conf=run_conf)


def task_instances(dagrun: Any) -> dict[str, Any]:
    return {ti.task_id: ti for ti in dagrun.get_task_instances()}


def xcom(dagrun: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dagrun.run_id, dag_ids=dagrun.dag_id, task_ids=task_id, key=key)
        row = session.scalars(query).first()
        return XComModel.deserialize_value(row) if row is not None else None
