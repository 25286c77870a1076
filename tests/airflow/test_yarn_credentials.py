"""The Airflow connection's S3 credentials reach a YARN job, and no secret shows where others look
(issue 31, item 5), in client and in cluster deploy mode (item 4).

One ``airflow dags test`` run of tests/airflow/dags/yarn_credentials.py, as a worker runs tasks:
its two ``CommittedSparkSubmitOperator`` tasks submit the same application to the session's YARN
cluster, in client then in cluster deploy mode, writing through the magic committer to the embedded
S3 with the ``aws_default`` connection's credentials (the embedded S3's, new for every session: a
secret unique to the run). The process's whole output is the task log (``dags test`` writes no log
files). The application (yarn_credentials_app.py) looks for the secret from inside, while it runs:
in every process's command line, in the environments of the machine's processes, in its
containers' launch scripts. Spark's event log is grepped after.

Cost: the Airflow CLI's start and two YARN applications: 193 s for the module (with Airflow's DB
migration and the embedded S3's start; the cluster-mode task 92 s, the client-mode one 70 s) on the
shared 2 cores (the AM and one 512m executor each, one after the other), plus the session's cluster.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dag_runs import xcom

from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
from airflow_commit_provider.hooks.spark_submit import CREDENTIALS_FILE_NAME

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.hadoop_peers]

DAG_ID = "test_yarn_credentials"
LOGICAL_DATE = "2024-01-01T00:00:00+00:00"
MODES = ("client", "cluster")
VENV_BIN = Path(sys.executable).parent
#: Bound of the whole run (a hang fails the module instead of the lane), under pytest's own 600 s,
#: and how long its stop may take.
RUN_BOUND_SECONDS = 480
STOP_BOUND_SECONDS = 60


@dataclass(frozen=True)
class YarnRun:
    """What the one DAG run left: its output (the task log), results and event logs."""

    secret: str
    access_key: str
    task_log: str
    exit_code: int
    results: dict[str, dict[str, Any]]
    event_logs: list[Path]
    bucket: str
    run_id: str | None


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def yarn_run(
    airflow_db: Path,
    hadoop_cluster: HadoopCluster,
    embedded_s3: EmbeddedS3,
    tmp_path_factory: pytest.TempPathFactory,
) -> YarnRun:
    work = tmp_path_factory.mktemp("yarn-credentials")
    results, events = work / "results", work / "events"
    results.mkdir()
    events.mkdir()
    bucket = embedded_s3.create_bucket(f"yarn-creds-{uuid.uuid4().hex[:12]}")
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env |= hadoop_cluster.env() | {
        "AIRFLOW_CONN_AWS_DEFAULT": embedded_s3.airflow_connection(),
        "AIRFLOW_CONN_SPARK_YARN": json.dumps({"conn_type": "spark", "host": "yarn"}),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
    }
    run_conf = {
        "destination": f"s3://{bucket}/events",
        "result_dir": str(results),
        "event_log_dir": str(events),
        "s3a_endpoint": embedded_s3.endpoint_url,
    }
    # Only this DAG's file is parsed, with room for a loaded host (Airflow allows 30 s a file).
    dag_file = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], "testdags", "yarn_credentials.py")
    env["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"] = "300"
    task_log = work / "task.log"
    with task_log.open("w") as output:  # a file, not a pipe: what a run that hangs wrote stays readable
        command = ["dags", "test", "-c", json.dumps(run_conf), "-f", str(dag_file), DAG_ID, LOGICAL_DATE]
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow", *command],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            exit_code = process.wait(RUN_BOUND_SECONDS)
        except subprocess.TimeoutExpired:
            # As a worker stops a task: SIGTERM runs the operator's on_kill, which stops spark-submit
            # (in a session of its own, out of reach of the CLI's process group) and aborts the job.
            process.terminate()
            exit_code = process.wait(STOP_BOUND_SECONDS)
    return YarnRun(
        secret=embedded_s3.secret_key,
        access_key=embedded_s3.access_key,
        task_log=task_log.read_text(errors="replace"),
        exit_code=exit_code,
        results={
            mode: json.loads(path.read_text())
            for mode in MODES
            if (path := results / f"{mode}.json").exists()
        },
        event_logs=sorted(path for path in events.rglob("*") if path.is_file()),
        bucket=bucket,
        run_id=_run_id(),
    )


def _run_id() -> str | None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalars(select(DagRun.run_id).where(DagRun.dag_id == DAG_ID)).first()


def task_states(run_id: str | None) -> dict[str, str | None]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id
            )
        ).all()
    return {task_id: str(state) if state else None for task_id, state in rows}


def test_both_deploy_modes_commit_with_the_connections_credentials(
    yarn_run: YarnRun, embedded_s3: EmbeddedS3
) -> None:
    """Each task succeeded and its job committed exactly the rows; the driver and a task found the
    connection's credentials, each where the hook put them for it."""
    assert yarn_run.exit_code == 0, yarn_run.task_log[-5000:]
    assert task_states(yarn_run.run_id) == {f"write_{mode}": "success" for mode in MODES}
    client = embedded_s3.client()
    for mode in MODES:
        written = xcom(_dagrun(yarn_run), f"write_{mode}")
        assert (written["committer"], written["engine"]) == ("magic", "python")
        keys = [
            item["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=yarn_run.bucket, Prefix=f"events/{mode}/"
            )
            for item in page.get("Contents", [])
        ]
        data = [key for key in keys if not any(part.startswith(("_", ".")) for part in key.split("/"))]
        assert {key.split("/")[2] for key in data} == {"p=0", "p=1"} and written["files"] == len(data)
        assert written["rows"] == 100

        outcome = yarn_run.results[mode]
        assert outcome["s3a_rows"] == 100, "S3A read the rows back with the shipped credentials"
        driver, executor = outcome["driver"], outcome["executor"]
        assert driver["secret_sha256"] == executor["secret_sha256"] == sha256(yarn_run.secret)
        assert executor["container_id"] and executor["credentials_method"] == "shared-credentials-file"
        if mode == "client":  # spark-submit's own child, given them in its environment
            assert driver["container_id"] is None and driver["credentials_method"] == "env"
        else:  # the application master's container, given the shipped file
            assert driver["container_id"] and driver["credentials_method"] == "shared-credentials-file"


def _dagrun(run: YarnRun) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(run_id=run.run_id, dag_id=DAG_ID)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["driver", "executor"])
def test_no_secret_on_any_command_line_while_the_application_runs(
    yarn_run: YarnRun, mode: str, where: str
) -> None:
    found = yarn_run.results[mode][where]["found"]
    assert found["processes"] >= 5, "the scan saw the machine's processes"  # spark-submit, AM, executor...
    assert found["in_cmdline"] == []


@pytest.mark.parametrize("mode", MODES)
def test_no_secret_in_a_containers_environment_or_launch_script(yarn_run: YarnRun, mode: str) -> None:
    """No process of a YARN container holds the secret in its environment (a client-mode driver,
    spark-submit's child, does: as on a standalone master); the launch scripts of the application's
    containers name the credentials file, and hold no secret."""
    for where in ("driver", "executor"):
        found = yarn_run.results[mode][where]["found"]
        assert [process for process in found["in_environ"] if process["container"]] == []
    scripts = yarn_run.results[mode]["executor"]["found"]["launch_scripts"]
    assert len(scripts) >= 2, scripts  # the AM's and the executor's, on the one node
    assert all(script["names_file"] and not script["secret"] for script in scripts), scripts


def test_no_secret_in_sparks_event_logs(yarn_run: YarnRun) -> None:
    assert len(yarn_run.event_logs) == len(MODES)
    for path in yarn_run.event_logs:
        text = path.read_text(errors="replace")
        assert "spark.executorEnv.AWS_SHARED_CREDENTIALS_FILE" in text, "the log has the job's Spark conf"
        assert yarn_run.secret not in text and yarn_run.access_key not in text, path.name


def test_no_secret_in_the_task_log(yarn_run: YarnRun) -> None:
    log = yarn_run.task_log
    assert "Passing S3 credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) to a YARN job" in log
    assert all(yarn_run.results[mode]["application_id"] in log for mode in MODES), (
        "spark-submit's output is in it"
    )
    assert yarn_run.secret not in log and yarn_run.access_key not in log


def test_where_the_shipped_file_lives(yarn_run: YarnRun, hadoop_cluster: HadoopCluster) -> None:
    """YARN took the file from the application's staging folder, private to the user, and localised
    it into the NodeManager's cache under the cluster's directory, as the user's own file."""
    assert hadoop_cluster.directory is not None
    for mode in MODES:
        outcome = yarn_run.results[mode]
        assert outcome["staging"]["folder"] == "rwx------"
        executor = outcome["executor"]
        assert executor["credentials_file_variable"] == CREDENTIALS_FILE_NAME
        localised = Path(executor["localised_file"])
        assert localised.is_relative_to(hadoop_cluster.directory) and "usercache" in localised.parts
