"""Test DAGs: the SuccessManifestSensor in deferrable and reschedule mode, run with dag.test()."""

from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG, Param

from airflow_commit_provider.sensors import SuccessManifestSensor

for mode in ("deferrable", "reschedule"):
    with DAG(
        dag_id=f"test_success_sensor_{mode}",
        schedule=None,
        start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
        params={"destination": Param("", type="string"), "job_id": Param("", type="string")},
    ) as dag:
        SuccessManifestSensor(
            task_id="wait",
            destination="{{ params.destination }}",
            job_id="{{ params.job_id }}",
            required_partitions=["dt={{ ds }}"],
            deferrable=mode == "deferrable",
            mode="reschedule" if mode == "reschedule" else "poke",
            poke_interval=0,
            timeout=600,
        )
    globals()[f"dag_{mode}"] = dag
