"""Scenario: what a committed write's asset events cost Airflow as its partitions grow.

A task's asset events reach Airflow in one call: the task runner sends every event (each partition
key is one, with the whole ``extra``) in its success message, and the API server writes a row per
event and queues the asset's DAGs for each before it answers, while a worker waits ``[workers]
execution_api_timeout`` (5 s by default) for it. For 10 to 10,000 partitions each repetition runs,
with ``dag.test()`` on SQLite, a task that emits:

- ours: ``assets.commit_extra`` and ``assets.emit_commit_event``, which give each partition its own
  event up to ``PARTITION_EVENTS`` and one event without keys past it;
- the baseline, one event per partition: the same extra and every partition as a key
  (``add_partitions``), what the task did before the cap.

Measured per variant: the success call (the task's ``end_date``, set just before it sends its
success, to its DAG run's ``end_date``, set once the call has returned), the events stored and the
bytes of their extras. Each run is its own process with its own Airflow home (Airflow reads its
configuration once per process), so the Airflow of one run shares nothing with the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.common import BenchEnv, ScenarioResult, log, rotated

VARIANTS = ("ours", "one event per partition")
DAG_ID = "bench_asset_events"
ASSET_URI = "s3://bench-asset-events/table"

_DAG = textwrap.dedent(
    '''
    """The bench's writer: one task emitting a committed write's event for PARTITIONS partitions."""
    import os
    from datetime import datetime, timezone

    from airflow.sdk import DAG, Asset, task

    from airflow_commit_provider.assets import commit_extra, emit_commit_event

    ASSET = Asset(uri="{asset}")
    with DAG(dag_id="{dag_id}", schedule=None, start_date=datetime(2024, 1, 1, tzinfo=timezone.utc)):

        @task(outlets=[ASSET])
        def write(**context):
            count = int(os.environ["BENCH_PARTITIONS"])
            partitions = [f"dt=2024-01-01/shard={{n:05d}}" for n in range(count)]
            result = {{"job_id": "0" * 36, "committer": "partitioned", "files": count, "bytes": count, "rows": count}}
            extra = commit_extra(result, partitions, partition_list="{asset}/_airflow_commit/job.success.json")
            if os.environ["BENCH_VARIANT"] == "ours":
                emit_commit_event(context, ASSET, extra, partitions)
            else:
                event = context["outlet_events"][ASSET]
                event.extra.update(extra)
                event.add_partitions(partitions)

        write()
    '''
)


def run(env: BenchEnv) -> ScenarioResult:
    counts = env.pick(tiny=[10], small=[100, 1000], full=[100, 1000, 5000, 10000])
    result = ScenarioResult(
        "asset_events",
        "Asset events of a committed write, by partitions written",
        env.size,
        env.repeat,
        parameters={
            "partitions": counts,
            "ours": "assets.emit_commit_event: one event per partition up to PARTITION_EVENTS, one past it",
            "baseline": "one event per partition (every partition a key), the same extra",
            "airflow": "dag.test() on SQLite, each run its own process and Airflow home",
        },
    )
    home = env.work_dir / "asset-events"
    _prepare_home(home)
    for count in counts:
        for turn in range(env.repeat):
            measured = {variant: _run_task(home, variant, count) for variant in rotated(VARIANTS, turn)}
            _record(result, count, measured)
    result.notes.append(
        "The success call is the task's end_date (set just before the task sends its success) to its "
        "DAG run's end_date (set once the call has returned): the API server's work on the events, "
        "in-process under dag.test(); a worker waits [workers] execution_api_timeout (5 s by default) for it."
    )
    return result


def _record(result: ScenarioResult, count: int, measured: dict[str, dict[str, Any]]) -> None:
    ours, baseline = measured["ours"], measured["one event per partition"]
    result.comparison(
        f"task success call, {count} partitions",
        ours_label="ours",
        baseline_label="one event per partition",
        unit="s",
        group="time",
    ).add(ours["success_call_s"], baseline["success_call_s"])
    for variant, found in measured.items():
        result.measure(f"{variant}: success call, {count} partitions", found["success_call_s"])
        result.measure(f"{variant}: events stored, {count} partitions", found["events"], "events")
        result.measure(
            f"{variant}: bytes of extras stored, {count} partitions", found["extra_bytes"], "bytes"
        )
        log(f"{count} partitions, {variant}: {found}")


def _prepare_home(home: Path) -> None:
    """An Airflow home with the writer DAG and a migrated SQLite database."""
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "bench_asset_events.py").write_text(_DAG.format(asset=ASSET_URI, dag_id=DAG_ID))
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=_airflow_env(home),
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _airflow_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }


def _run_task(home: Path, variant: str, count: int) -> dict[str, Any]:
    """One run of the writer (in a process of its own): what `_measure_run` prints."""
    with tempfile.TemporaryFile() as output:
        subprocess.run(
            [sys.executable, "-m", "bench.asset_events", variant, str(count)],
            env={**_airflow_env(home), "BENCH_VARIANT": variant, "BENCH_PARTITIONS": str(count)},
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.DEVNULL,
        )
        output.seek(0)
        lines = output.read().decode().strip().splitlines()
    # Airflow may log to stdout after the measurement's line: the last line that is a JSON object.
    measured = next(line for line in reversed(lines) if line.startswith("{"))
    return dict(json.loads(measured))


def _measure_run(variant: str, count: int) -> dict[str, Any]:
    """Run the writer DAG once with dag.test(); its success call, events and extras."""
    from airflow.models.asset import AssetEvent
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_commit_provider.compat import dag_bag_class

    bag = dag_bag_class()(dag_folder=Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]))
    dag = bag.get_dag(DAG_ID)
    # A logical date of its own per run (a DAG run is unique by it): now, to the microsecond.
    run = dag.test(logical_date=datetime.now(timezone.utc))
    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run.run_id)
        ).one()
        events = session.scalars(select(AssetEvent).where(AssetEvent.source_run_id == run.run_id)).all()
        extra_bytes = sum(len(json.dumps(event.extra)) for event in events)
        return {
            "variant": variant,
            "partitions": count,
            "state": str(ti.state),
            "success_call_s": (run.end_date - ti.end_date).total_seconds(),
            "events": len(events),
            "extra_bytes": extra_bytes,
        }


if __name__ == "__main__":
    print(json.dumps(_measure_run(sys.argv[1], int(sys.argv[2]))))
