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


def create_asset_triggered_runs(dag_id: str) -> list[Any]:
    """The runs the scheduler creates for `dag_id` from the asset events queued for it.

    ``dag.test()`` registers a task's asset events and queues the DAGs scheduled on them, as a
    deployment does, but creates no runs for them: the scheduler does, in one step of its loop
    (``SchedulerJobRunner._create_dagruns_for_dags``: partitioned runs from queued partition keys,
    then plain asset-triggered runs). That step is run here once, as Airflow's scheduler tests do,
    without the rest of the loop.
    """
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.sqlalchemy import prohibit_commit
    from airflow.utils.types import DagRunType
    from sqlalchemy import select

    runner = SchedulerJobRunner(job=Job())
    with create_session() as session:
        before = set(session.scalars(select(DagRun.run_id).where(DagRun.dag_id == dag_id)))
        with prohibit_commit(session) as guard:
            runner._create_dagruns_for_dags(guard=guard, session=session)
        runs = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_type == DagRunType.ASSET_TRIGGERED)
        ).all()
        created = [run for run in runs if run.run_id not in before]
        session.expunge_all()
    return created


def run_task(dag_id: str, task_id: str, run_id: str) -> Any:
    """Run one task of an existing run as ``airflow tasks test <dag> <task> <run_id>`` does; its instance."""
    from airflow.cli import cli_parser
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    args = cli_parser.get_parser().parse_args(["tasks", "test", dag_id, task_id, run_id])
    args.func(args)
    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id, TaskInstance.run_id == run_id
            )
        ).one()
        session.expunge(ti)
    return ti
