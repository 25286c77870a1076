"""Durable submission on the real YARN cluster (the session's ``hadoop_cluster``): tries of
``CommittedSparkSubmitOperator`` in YARN cluster mode with ``yarn_track_via_rm_api``, writing to
``hdfs://`` with the manifest committer (a destination that needs no credentials).

One task instance, its tries in order, on two applications:

1. **A lost worker, found by tag.** Try 1 runs in a process of its own (``worker_try.py``, as a
   worker runs it), with no task state store (as on Airflow before 3.3: nothing is stored). Its
   application stops at a gate before its job commits, and the worker is SIGKILLed: the
   application runs on. Try 2 finds it through the ResourceManager by its job's tag, waits for it
   (the gate is released only once try 2 is waiting), and adopts the job it committed: one
   application, one copy, and try 2 ran no application.
2. **A cleared task writes again, and a kill goes through the RM.** Try 3 (the cleared task)
   finds try 1's application ended and its job delivered, so it submits a new application; killed
   at that application's gate, it kills the application through the ResourceManager and aborts
   its job. The delivered data stays as it was.

The reconnect through a stored application ID, under the real scheduler and task state store, is
tests/deployment's. Cost: two YARN applications plus the cluster's start when no test before started
it; measured at a load of 20-40 on the 2 cores: 906 s of which the cluster's start about 300 s, the
first application about 300 s, the second 293 s (a quiet host should take a fraction of that).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
import requests
from support.task_instances import task_instance
from support.waiting import wait_until

from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
from airflow_commit_provider.devtools.yarn_apps import yarn_conf
from airflow_commit_provider.operators.durable_submission import job_tag
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
from airflow_commit_provider.success.check import load_success
from airflow_commit_provider.tries.plan import try_job_id

if TYPE_CHECKING:
    from airflow.sdk import Context

#: A first test also starts the cluster and runs an application (minutes under load).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]

TESTS = Path(__file__).resolve().parents[1]
APP = TESTS / "hadoop" / "gated_yarn_app.py"
WORKER_TRY = Path(__file__).with_name("worker_try.py")
VENV_BIN = Path(sys.executable).parent
CONNECTION = "spark_yarn_durable"
KEY = TaskKey("durable_yarn", "write", "manual__2026-11-29T00:00:00+00:00", -1)
ROWS = 200
#: Bound of an application's run or a try (an application costs 30-60 s here, more under load).
BOUND_SECONDS = 1200.0


def container_conf(cluster: HadoopCluster) -> dict[str, str]:
    """The test cluster's conf (`yarn_conf`) for a cluster-mode application: a small driver in the AM
    (its 1 GB container fits either NodeManager), JVMs tuned for starting fast, this venv's Python,
    and HDFS's client configuration for the driver and the executors (which open ``hdfs://``
    through WebHDFS)."""
    hadoop_conf = str(cluster.conf_dir)
    return {
        **yarn_conf(),
        "spark.driver.memory": "512m",
        # JVMs tuned for starting fast rather than running long (the jobs are small).
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.pyspark.python": sys.executable,
        "spark.yarn.appMasterEnv.HADOOP_CONF_DIR": hadoop_conf,
        "spark.executorEnv.HADOOP_CONF_DIR": hadoop_conf,
        "spark.yarn.appMasterEnv.GATED_APP_TESTS_DIR": str(TESTS),
    }


@pytest.fixture(scope="module")
def yarn(hadoop_cluster: HadoopCluster) -> Iterator[HadoopCluster]:
    """The Spark connection to the cluster's YARN in cluster mode with its RM address, and the
    worker's environment: HADOOP_CONF_DIR (spark-submit, and the try's own HDFS store) and this
    venv's spark-submit on PATH."""
    connection = {
        "conn_type": "spark",
        "host": "yarn",
        "extra": {
            "deploy-mode": "cluster",
            "yarn_resourcemanager_webapp_address": hadoop_cluster.rm_webapp_url,
        },
    }
    environment = {
        f"AIRFLOW_CONN_{CONNECTION.upper()}": json.dumps(connection),
        "HADOOP_CONF_DIR": str(hadoop_cluster.conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
    }
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        yield hadoop_cluster
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def operator_arguments(cluster: HadoopCluster, markers: Path) -> dict[str, Any]:
    return {
        "application": str(APP),
        "destination": "hdfs:///durable/events",
        "committer": "manifest",
        "conn_id": CONNECTION,
        "yarn_track_via_rm_api": True,
        "aws_conn_id": None,
        "name": "durable-yarn",
        "application_args": ["--markers", str(markers), "--gate-on-try", "1"],
        "conf": container_conf(cluster),
        "status_poll_interval": 1,
    }


def rm_apps(cluster: HadoopCluster, *job_ids: str) -> list[dict[str, Any]]:
    """The applications the ResourceManager knows with one of these jobs' tags."""
    response = requests.get(
        f"{cluster.rm_webapp_url}/ws/v1/cluster/apps",
        params={"applicationTags": ",".join(job_tag(job) for job in job_ids)},
        timeout=30,
    )
    response.raise_for_status()
    return sorted((response.json().get("apps") or {}).get("app") or [], key=lambda app: app["id"])


def rm_app(cluster: HadoopCluster, application_id: str) -> dict[str, Any]:
    response = requests.get(f"{cluster.rm_webapp_url}/ws/v1/cluster/apps/{application_id}", timeout=30)
    response.raise_for_status()
    return response.json()["app"]


def visible_files(store: HdfsStore, destination: StorePath) -> dict[str, int]:
    """What a reader sees under `destination`: the data files (records and markers are hidden by
    their ``_`` or ``.`` prefix), with their sizes."""
    files = {s.path.relative_to(destination): s.size for s in store.list_files(destination)}
    return {
        name: size
        for name, size in files.items()
        if not any(p.startswith(("_", ".")) for p in name.split("/"))
    }


def ti(try_number: int) -> Any:
    return task_instance(
        dag_id=KEY.dag_id,
        task_id=KEY.task_id,
        run_id=KEY.run_id,
        map_index=KEY.map_index,
        try_number=try_number,
    )


class TryInThread:
    """``execute`` of one try in a thread (the test waits for it, or kills it as Airflow does)."""

    def __init__(self, operator: CommittedSparkSubmitOperator, try_number: int) -> None:
        self.operator = operator
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.context = cast("Context", {"ti": ti(try_number)})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.operator.execute(self.context)
        except BaseException as error:
            self.error = error

    def join(self) -> None:
        self.thread.join(BOUND_SECONDS)
        assert not self.thread.is_alive(), "the try did not end within its bound"


@pytest.fixture(scope="module")
def store(yarn: HadoopCluster) -> Iterator[HdfsStore]:
    hdfs = HdfsStore(HdfsSettings(webhdfs_url=yarn.webhdfs_url))
    yield hdfs
    hdfs.close()


@pytest.fixture(scope="module")
def lost_worker(
    yarn: HadoopCluster, store: HdfsStore, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Try 1 in a worker process SIGKILLed at its application's gate; try 2 finds the application
    by tag, waits for it and adopts its job. What the checks read."""
    markers = tmp_path_factory.mktemp("durable-markers")
    arguments = operator_arguments(yarn, markers)
    spec = {"operator": arguments, "ti": {**dataclasses.asdict(KEY), "try_number": 1}}
    worker_log = markers / "worker-try1.log"
    with worker_log.open("w") as log:  # a file, not a pipe nobody reads while the worker runs
        worker = subprocess.Popen(
            [sys.executable, str(WORKER_TRY), json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def at_gate() -> bool:
            if worker.poll() is not None:
                raise AssertionError(
                    f"try 1's worker ended before its gate:\n{worker_log.read_text()[-5000:]}"
                )
            return (markers / "gate-try1.json").exists()

        wait_until(at_gate, "try 1's application at its gate", BOUND_SECONDS, interval=0.5)
        started = json.loads((markers / "started-try1.json").read_text())
        assert rm_app(yarn, started["application_id"])["state"] == "RUNNING"
        worker.send_signal(signal.SIGKILL)  # the worker dies: no on_kill, the application runs on
        worker.wait(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == -signal.SIGKILL
    assert rm_app(yarn, started["application_id"])["state"] == "RUNNING", (
        "the application outlived its worker"
    )
    assert "Durable submission: the application is followed through" in worker_log.read_text()

    retry = TryInThread(CommittedSparkSubmitOperator(task_id=KEY.task_id, **arguments), 2)
    # Released only once try 2 waits for the application (it polls the RM while it does): a try 2
    # that did not reconnect would have fenced the job and submitted an application of its own.
    wait_until(
        lambda: retry.operator._try is not None and retry.operator._try.spark_submits,
        "try 2 to reconnect to try 1's application",
        BOUND_SECONDS,
        interval=0.2,
    )
    (markers / "release-try1").write_text("go")
    retry.join()
    return {
        "markers": markers,
        "arguments": arguments,
        "started": started,
        "retry": retry,
    }


def test_a_lost_workers_application_is_found_by_tag_and_its_job_adopted(
    yarn: HadoopCluster, store: HdfsStore, lost_worker: dict[str, Any]
) -> None:
    retry, started = lost_worker["retry"], lost_worker["started"]
    assert retry.error is None, retry.error
    job = try_job_id(KEY, 1)
    assert started["job_id"] == job
    summary = retry.result
    assert (summary["job_id"], summary["adopted_from_try"], summary["rows"]) == (job, 1, ROWS)
    assert not (lost_worker["markers"] / "started-try2.json").exists(), "try 2 ran no application"
    # One application for the task instance: try 1's, tagged with its job, ended SUCCEEDED.
    apps = rm_apps(yarn, try_job_id(KEY, 1), try_job_id(KEY, 2))
    assert [app["id"] for app in apps] == [started["application_id"]]
    assert (apps[0]["state"], apps[0]["finalStatus"]) == ("FINISHED", "SUCCEEDED")
    assert job_tag(job) in apps[0]["applicationTags"].split(",")
    # One copy: the files _SUCCESS lists are all there is, every row once.
    destination = StorePath.parse("hdfs:///durable/events")
    success = load_success(store, destination)
    assert success.job_id == job
    listed = {
        StorePath.from_uri(f.uri).relative_to(destination) for f in success.iter_all_files(store, destination)
    }
    assert set(visible_files(store, destination)) == listed
    assert inspect_job(store, destination, job).delivered


def test_a_cleared_task_writes_again_and_its_kill_goes_through_the_rm(
    yarn: HadoopCluster, store: HdfsStore, lost_worker: dict[str, Any]
) -> None:
    markers = lost_worker["markers"]
    arguments = {
        **lost_worker["arguments"],
        "application_args": ["--markers", str(markers), "--gate-on-try", "3"],
    }
    destination = StorePath.parse("hdfs:///durable/events")
    before = visible_files(store, destination)
    cleared = TryInThread(CommittedSparkSubmitOperator(task_id=KEY.task_id, **arguments), 3)

    def at_gate() -> bool:
        if not cleared.thread.is_alive():
            raise AssertionError(f"try 3 ended before its gate: {cleared.error or cleared.result}")
        return (markers / "gate-try3.json").exists()

    wait_until(at_gate, "try 3's application at its gate", BOUND_SECONDS, interval=0.5)
    started = json.loads((markers / "started-try3.json").read_text())
    job = try_job_id(KEY, 3)
    assert started["job_id"] == job, "the cleared task submitted a new application for its own job"
    assert rm_app(yarn, started["application_id"])["state"] == "RUNNING"

    cleared.operator.on_kill()  # as Airflow's SIGTERM handler calls it
    cleared.join()
    assert cleared.error is not None, "a killed try fails"
    killed = rm_app(yarn, started["application_id"])
    assert killed["state"] == "KILLED", killed
    assert inspect_job(store, destination, job).state is JobState.ABORTED
    assert {app["id"] for app in rm_apps(yarn, *(try_job_id(KEY, n) for n in (1, 2, 3)))} == {
        lost_worker["started"]["application_id"],
        started["application_id"],
    }
    assert visible_files(store, destination) == before, "the delivered data stays as it was"
