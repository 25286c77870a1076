"""Running DAGs with `dag.test()` in the tests and reading back what they did."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow import __version__ as AIRFLOW_VERSION
from packaging.version import Version

#: Airflow 3.3 lets a task emit partition keys (`add_partitions`); before it, asset events have none.
PARTITION_KEYS = Version(Version(AIRFLOW_VERSION).base_version) >= Version("3.3")


def load_dag(dag_id: str) -> Any:
    """The DAG as dag.test() will find it: parsed from the test DAG folder (a DAG bundle)."""
    from airflow_commit_provider.compat import dag_bag_class

    DagBag = dag_bag_class()

    bag = DagBag(dag_folder=Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def run_dag(dag: Any, logical_date: datetime, run_conf: dict[str, Any] | None = None) -> Any:
    return dag.test(logical_date=logical_date, run_conf=run_conf)


#: A JVM tuned for starting fast rather than running long.
FAST_JVM = {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}


def run_daily_ingest(day: datetime, **conf: Any) -> Any:
    """One run of the daily example DAG; a fresh DAG object each time (a run's conf updates its params)."""
    dag = load_dag("daily_partitioned_ingest")
    writer = dag.get_task("write_partition")
    # A retry without the production minute of delay (dag.test would wait it out), and a fast JVM.
    writer.retry_delay = timedelta(0)
    writer.conf = {**writer.conf, **FAST_JVM}
    return run_dag(dag, day, {"fail_on_try": 0, **conf})


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


def start_run(dagrun: Any) -> None:
    """Start a queued run as the scheduler does before any of its tasks runs.

    ``airflow tasks test`` on a run the scheduler never started works on Airflow 3.2 and 3.3, but 3.1's
    execution API refuses to start a task of a run without a ``start_date``.
    """
    from airflow.models.dagrun import DagRun
    from airflow.utils import timezone
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState

    with create_session() as session:
        run = session.get(DagRun, dagrun.id)
        run.state, run.start_date = DagRunState.RUNNING, timezone.utcnow()


def run_daily_report(written: dict[str, Any], day: str) -> dict[str, Any]:
    """The one run of daily_events_report the day's asset event makes (`written`: the ingest's
    ``write_partition`` XCom): what its task read."""
    [report_run] = create_asset_triggered_runs("daily_events_report")
    key = day if PARTITION_KEYS else None  # Airflow 3.1/3.2: a plain asset-triggered run
    assert getattr(report_run, "partition_key", None) == key
    start_run(report_run)
    assert run_task("daily_events_report", "report_day", report_run.run_id).state == "success"
    report = xcom(report_run, "report_day")
    assert (report["day"], report["partition_key"], report["job_id"]) == (day, key, written["job_id"])
    assert report["event"] == {
        **{key: written[key] for key in ("job_id", "committer", "files", "bytes", "rows")},
        "partitions": [f"dt={day}"],
        "partition_count": 1,
    }
    return dict(report)
