"""`make demo`: the ``daily_partitioned_ingest`` example DAG end to end on the embedded defaults.

- S3: an embedded SeaweedFS on 127.0.0.1 (bucket ``commit-demo``), reached through the Airflow
  connection ``aws_default`` (credentials, region and ``endpoint_url`` in the extras);
- Spark: local, through the connection ``spark_default`` (host ``local[*]``) and spark-submit;
- Airflow: a throwaway AIRFLOW_HOME with SQLite, migrated, and the DAG run by ``dag.test()``.

It prints where the output is, the ``_SUCCESS`` summary and the asset event the write emitted (the
table's URI, the partition key ``dt=<day>`` and the commit's ``extra``: what a DAG scheduled on the
table, such as ``daily_events_report``, receives), then stops the S3 server (always),
which deletes the data; ``--keep`` waits for Enter first so you can look around with any S3 client.
``--fail-first-try`` makes the first Spark job fail to show the abort and the retry.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from datetime import datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

DAG_ID = "daily_partitioned_ingest"
BUCKET = "commit-demo"
_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def quiet_warnings() -> None:
    """Third-party deprecation noise (pathspec, starlette) would hide the demo's output."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*deprecated.*")


def find_dags_folder() -> Path:
    folder = Path(__file__).resolve().parents[2] / "dags_examples"
    if not (folder / f"{DAG_ID}.py").is_file():
        raise SystemExit(
            f"the example DAGs are not next to the package ({folder}): run the demo from the repository"
        )
    return folder


def airflow_environment(home: Path, dags: Path, server: EmbeddedS3, verbose: bool) -> dict[str, str]:
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO" if verbose else "WARNING",
        "AIRFLOW_CONN_AWS_DEFAULT": server.airflow_connection(),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "DAILY_INGEST_ROOT": f"s3://{BUCKET}",
        # Spark's Python workers must be this interpreter (with pyarrow and boto3).
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
    }


def migrate(env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        raise SystemExit(f"airflow db migrate failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


def run_dag(dags: Path, logical_date: datetime, fail_first_try: bool, verbose: bool) -> Any:
    from airflow_commit_provider.compat import dag_bag_class

    DagBag = dag_bag_class()

    if not verbose:  # after Airflow's import, which sets up its own warning filters
        quiet_warnings()
    bag = DagBag(dag_folder=dags)
    if bag.import_errors:
        raise SystemExit(f"the example DAGs do not import: {bag.import_errors}")
    dag = bag.dags[DAG_ID]
    if fail_first_try:
        dag.get_task("write_partition").retry_delay = timedelta(0)
    return dag.test(logical_date=logical_date, run_conf={"fail_on_try": int(fail_first_try)})


def xcom(dagrun: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=dagrun.run_id, dag_ids=dagrun.dag_id, task_ids=task_id, key="return_value"
        )
        row = session.scalars(query).first()
        return XComModel.deserialize_value(row) if row is not None else None


def asset_events(dagrun: Any) -> list[dict[str, Any]]:
    """The asset events the run emitted, as a DAG scheduled on them receives them."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select
    from sqlalchemy.orm import joinedload

    with create_session() as session:
        query = (
            select(AssetEvent)
            .where(AssetEvent.source_dag_id == dagrun.dag_id, AssetEvent.source_run_id == dagrun.run_id)
            .options(joinedload(AssetEvent.asset))
        )
        return [
            {
                "asset": event.asset.uri,
                "source_task_id": event.source_task_id,
                "partition_key": getattr(event, "partition_key", None),  # Airflow 3.2+
                "extra": event.extra,
            }
            for event in session.scalars(query).unique()
        ]


def report(dagrun: Any, server: EmbeddedS3, day: str) -> bool:
    from airflow_commit_provider.core.layout import SUCCESS_FILENAME
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.success.check import load_success

    states = {ti.task_id: (str(ti.state), ti.try_number) for ti in dagrun.get_task_instances()}
    print()
    say(f"DAG run {dagrun.run_id}: {dagrun.state}")
    for task_id in ("land_source_data", "write_partition", "wait_for_success", "check_partition"):
        state, tries = states.get(task_id, ("missing", 0))
        say(f"  {task_id:<18} {state:<8} (tries: {tries})")
    table = StorePath("s3", BUCKET, "warehouse/events")
    store = server.store()
    try:
        files = sorted(store.list_files(table), key=lambda status: status.path)
        pending = list(store.list_multipart_uploads(StorePath("s3", BUCKET, "")))
        print()
        say(f"output: {table} (S3 endpoint {server.endpoint_url})")
        for status in files:
            say(f"  {status.path.relative_to(table):<75} {status.size:>8} bytes")
        say(f"pending multipart uploads left in the bucket: {len(pending)}")
        success = load_success(store, table) if any(s.path.name == SUCCESS_FILENAME for s in files) else None
    finally:
        store.close()
    written = xcom(dagrun, "write_partition")
    checked = xcom(dagrun, "check_partition")
    if written:
        print()
        say("write_partition returned (XCom):")
        print(json.dumps(written, indent=2))
    if checked:
        say(f"check_partition: {checked['rows']} rows in {checked['files']} files of dt={day}")
    if success is not None:
        print()
        say(f"_SUCCESS summary ({table}/_SUCCESS):")
        print(json.dumps(success.summary(), indent=2))
    for event in asset_events(dagrun):
        print()
        say(f"asset event of {event['source_task_id']} (what daily_events_report is scheduled on):")
        print(json.dumps(event, indent=2))
    return str(dagrun.state) == "success" and success is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", help="logical date YYYY-MM-DD (default: yesterday, UTC)")
    parser.add_argument("--fail-first-try", action="store_true", help="fail the first Spark job (retry demo)")
    parser.add_argument("--keep", action="store_true", help="wait for Enter before stopping the S3 server")
    parser.add_argument("--verbose", action="store_true", help="Airflow and Spark logs at INFO")
    args = parser.parse_args(argv)
    day = args.date or (datetime.now(timezone.utc).date() - timedelta(days=1)).isoformat()
    logical_date = datetime.combine(datetime.fromisoformat(day).date(), time(0), tzinfo=timezone.utc)
    dags = find_dags_folder()
    if not args.verbose:
        quiet_warnings()
    for name in _AWS_ENV:  # S3 settings come from the Airflow connection only
        os.environ.pop(name, None)

    say("starting the embedded S3 (SeaweedFS on 127.0.0.1)")
    with EmbeddedS3() as server, tempfile.TemporaryDirectory(prefix="airflow-commit-demo-") as home:
        server.create_bucket(BUCKET)
        say(f"S3 at {server.endpoint_url}, bucket {BUCKET}; AIRFLOW_HOME={home}")
        env = airflow_environment(Path(home), dags, server, args.verbose)
        os.environ.update(env)  # before Airflow is imported: it reads its configuration once
        say("airflow db migrate (SQLite)")
        migrate(env)
        say(f"running {DAG_ID} for {day} with dag.test(): local Spark, partitioned committer, replace mode")
        dagrun = run_dag(dags, logical_date, args.fail_first_try, args.verbose)
        ok = report(dagrun, server, day)
        if args.keep:
            input("[demo] press Enter to stop the S3 server (its data is deleted) ")
    say("embedded S3 stopped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
