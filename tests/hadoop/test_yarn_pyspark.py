"""PySpark on the test YARN cluster in client deploy mode (issue 31, item 4): one application runs
several ``write_committed`` jobs (``yarn_app.py``), each to its own destination, and the tests
here check what each left.

- To the embedded S3 with ``magic`` (what an S3 append gets by default), and to HDFS with
  ``manifest`` and ``file-v1`` (the committers that need no multipart uploads). The executors reach
  WebHDFS with the address and user the driver resolved from its ``HADOOP_CONF_DIR``
  (`TaskConfig.hdfs`): their own environment, the NodeManager's, points at a dead WebHDFS address
  here, and a write that used it would fail.
- A YARN container killed mid-task, on S3 (magic) and HDFS (manifest): attempt 0 of one task
  closes some of its files, then SIGKILLs its executor's JVM. Spark runs the task again in the
  new executor YARN starts; the commit still has every row once and nothing of the dead attempt.
- Speculation, on S3 (magic) and HDFS (manifest): one task's first attempt waits until Spark's
  speculative copy of it, on the other host, has written a file; both write, the first attempt
  commits its task, the copy finds the task committed (or is killed by Spark first), and the
  commit has every row once and nothing of the copy. The cluster's two NodeManagers are two hosts
  to Spark (``localhost`` and ``127.0.0.2``); the AM's 3 GB container leaves room for one executor
  beside it, so the two executors land one on each host.

It shows what a YARN job needs from us, as the operator would submit it: the executors import this
package from the ``--py-files`` zip the operator builds (``operators.submission.shipped_py_files``),
the way Spark's documentation for YARN ships Python dependencies.

Cost: one spark-submit (the AM and two 512m executors, about 2 GB above the cluster; an executor
again after each kill; the speculated writes wait ``spark.speculation.minTaskRuntime``, 30 s).
Measured once, at a load average of 20-25 on the shared 2 cores: the application ran 790 s
(SparkContext uptime; a write's tasks took 40-90 s early on and 3-7 s later, as the load eased),
the module 23 min with the session's cluster start (8 min at that load); the checks take 25 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from support.markers import write_marker
from support.one_copy import assert_one_copy, data_files
from support.spark_events import event_log

from airflow_commit_provider.core.formats.attempts import KILLED, REFUSED, SPECULATIVE_LOST, LostAttempt
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import ENV_WEBHDFS_URL, HdfsSettings
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
from airflow_commit_provider.devtools.yarn_apps import yarn_conf
from airflow_commit_provider.operators.submission import shipped_py_files

pytestmark = [pytest.mark.slow, pytest.mark.hadoop_cluster, pytest.mark.s3, pytest.mark.timeout(1800)]

APP = Path(__file__).with_name("yarn_app.py")
VENV_BIN = Path(sys.executable).parent
#: Bound of the one spark-submit (a hang fails the tests instead of the lane), within the module's
#: pytest timeout.
SUBMIT_BOUND_SECONDS = 1500
ROWS = 100
#: Each of the 2 tasks writes 25 rows into each of the 2 table partitions, 10 rows a file at most.
FILES = 2 * 2 * 3
#: A WebHDFS address nothing listens on (the discard port), set in the executors' environment.
DEAD_WEBHDFS = "http://127.0.0.1:9"

#: The writes of the one application: name -> (store, committer, fault).
WRITES = {
    "s3-magic": ("s3", "magic", "none"),
    "hdfs-manifest": ("hdfs", "manifest", "none"),
    "hdfs-file-v1": ("hdfs", "file-v1", "none"),
    "s3-magic-killed-container": ("s3", "magic", "kill-executor"),
    "hdfs-manifest-killed-container": ("hdfs", "manifest", "kill-executor"),
    "s3-magic-speculated": ("s3", "magic", "speculate"),
    "hdfs-manifest-speculated": ("hdfs", "manifest", "speculate"),
}
KILLED_CONTAINER = [name for name, (_, _, fault) in WRITES.items() if fault == "kill-executor"]
SPECULATED = [name for name, (_, _, fault) in WRITES.items() if fault == "speculate"]
#: The two NodeManagers' hosts, as Spark names executors' hosts (devtools/MiniHadoopCluster.java).
HOSTS = {"localhost", "127.0.0.2"}


def application_conf(event_dir: Path) -> dict[str, str]:
    """The test cluster's conf (`yarn_conf`), with what this application adds: two small executors,
    one on each NodeManager, running this venv's Python (boto3, pyarrow); the event log;
    speculation for a task that has run `minTaskRuntime` (only the straggler, which waits for its
    copy: another write's task that ran that long could be copied too, which the checks allow)."""
    return {
        **yarn_conf(),
        # An AM container of 3 GB (2g and Spark's 384m overhead, in 1 GB steps): the first
        # NodeManager (4 GB) has room for one executor beside it, the second (1 GB) for one, never the AM.
        "spark.yarn.am.memory": "2g",
        "spark.executor.instances": "2",
        "spark.speculation": "true",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.minTaskRuntime": "30s",
        # The threshold alone decides: Spark's efficiency heuristic may wait twice as long for a
        # task whose input rate looks normal (the straggler took all its rows in one batch).
        "spark.speculation.efficiency.enabled": "false",
        "spark.python.task.killTimeout": "500ms",
        "spark.pyspark.python": sys.executable,
        # The trap: an executor that resolved WebHDFS from its own environment would fail.
        f"spark.executorEnv.{ENV_WEBHDFS_URL}": DEAD_WEBHDFS,
        # On the shared 2 cores under load (a load average of 20-60 was seen), the AM waited for
        # the driver's RPC reply longer than the default 120 s and YARN restarted it.
        "spark.network.timeout": "600s",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_dir.as_uri(),
        "spark.eventLog.compress": "false",
    }


@dataclass
class Application:
    """The one application's outcome and where its writes went."""

    outcome: dict[str, Any]
    destinations: dict[str, StorePath]
    stores: dict[str, Store]
    markers: Path
    events: list[dict[str, Any]]
    py_files: str

    def write(self, name: str) -> dict[str, Any]:
        written = self.outcome["writes"][name]
        assert "error" not in written, f"{name}: {written['error']}"
        return written["summary"]

    def store(self, name: str) -> Store:
        return self.stores[WRITES[name][0]]

    def lost_attempts(self, name: str) -> dict[str, LostAttempt]:
        """The task attempts of the write's job that were not their task's commit, as its job
        record lists them, by task attempt ID (none when its record lists none)."""
        record = load_job_record(self.store(name), self.destinations[name], self.write(name)["job_id"])
        # None: no attempt was lost (a speculative copy that adopted its task's commit is not)
        return {attempt.task_attempt_id: attempt for attempt in record.lost_attempts or []}

    def task_attempt_id(self, name: str, task: int, spark_attempt_id: int) -> str:
        """Our task attempt ID of Spark's task attempt `spark_attempt_id` (``JobLayout``)."""
        return f"attempt_{self.write(name)['job_id']}_m_{task:06d}_{spark_attempt_id}"


@pytest.fixture(scope="module")
def application(
    hadoop_cluster: HadoopCluster, embedded_s3: EmbeddedS3, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Application]:
    work = tmp_path_factory.mktemp("yarn-app")
    markers, events = work / "markers", work / "events"
    markers.mkdir()
    events.mkdir()
    bucket = embedded_s3.create_bucket(f"yarn-{uuid.uuid4().hex[:12]}")
    hdfs_root = StorePath.parse(f"{hadoop_cluster.fs_default_name}/yarn-{uuid.uuid4().hex[:12]}")
    roots = {"s3": StorePath.parse(f"s3://{bucket}"), "hdfs": hdfs_root}
    destinations = {name: roots[store].join("tables", name) for name, (store, _, _) in WRITES.items()}
    spec = work / "spec.json"
    write_marker(
        spec,
        {
            "result": str(work / "result.json"),
            "markers": str(markers),
            "writes": [
                {"name": name, "destination": str(destinations[name]), "committer": committer, "fault": fault}
                for name, (_, committer, fault) in WRITES.items()
            ],
        },
    )
    py_files = shipped_py_files(None, True, work)
    assert py_files is not None
    command = [str(VENV_BIN / "spark-submit"), "--master", "yarn", "--deploy-mode", "client"]
    command += ["--py-files", py_files]
    for key, value in application_conf(events).items():
        command += ["--conf", f"{key}={value}"]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "AIRFLOW_COMMIT_"))}
    env |= embedded_s3.env() | hadoop_cluster.env()
    env |= {"SPARK_LOCAL_IP": "127.0.0.1", "PATH": os.pathsep.join([str(VENV_BIN), env.get("PATH", "")])}
    log = work / "spark-submit.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, str(APP), str(spec)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            process.wait(timeout=SUBMIT_BOUND_SECONDS)
        finally:
            with contextlib.suppress(ProcessLookupError):  # executors' Python workers can outlive the driver
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, log.read_text(errors="replace")[-5000:]
    outcome = json.loads((work / "result.json").read_text())
    stores: dict[str, Store] = {
        "s3": embedded_s3.store(),
        "hdfs": HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url)),
    }
    try:
        yield Application(
            outcome, destinations, stores, markers, event_log(events, outcome["application_id"]), py_files
        )
    finally:
        with contextlib.suppress(Exception):
            stores["hdfs"].delete_tree(hdfs_root)
        for store in stores.values():
            store.close()


def test_the_resource_manager_reports_the_application_succeeded(
    application: Application, hadoop_cluster: HadoopCluster
) -> None:
    app_id = application.outcome["application_id"]
    app = requests.get(f"{hadoop_cluster.rm_webapp_url}/ws/v1/cluster/apps/{app_id}", timeout=30).json()[
        "app"
    ]
    assert (app["applicationType"], app["state"], app["finalStatus"]) == ("SPARK", "FINISHED", "SUCCEEDED")


def test_executors_import_the_shipped_package_in_their_containers(
    application: Application, hadoop_cluster: HadoopCluster
) -> None:
    """A task ran in a container of this application, under the cluster's NodeManager, and
    imported the package from the zip shipped into that container; its environment had the dead
    WebHDFS address, which the HDFS writes did not use."""
    app_id = application.outcome["application_id"]
    executor = application.outcome["executor"]
    assert hadoop_cluster.directory is not None
    assert executor["container_id"].startswith("container_" + app_id.removeprefix("application_"))
    assert Path(executor["cwd"]).is_relative_to(hadoop_cluster.directory)
    assert executor["package"] == (
        f"{executor['cwd']}/{Path(application.py_files).name}/airflow_commit_provider/__init__.py"
    )
    assert executor["AIRFLOW_COMMIT_WEBHDFS_URL"] == DEAD_WEBHDFS


@pytest.mark.parametrize("name", list(WRITES))
def test_every_row_is_committed_once_and_nothing_is_left(application: Application, name: str) -> None:
    """Complete and exclusive: the rows read back once each from the files `_SUCCESS` lists, in
    both table partitions, and no pending upload, temp tree or hidden file is left."""
    summary = application.write(name)
    store, destination = application.store(name), application.destinations[name]
    assert summary["committer"] == WRITES[name][1]
    assert_one_copy(store, destination, ROWS, summary["job_id"])
    visible = data_files(store, destination)
    assert {path.split("/")[0] for path in visible} == {"p=0", "p=1"}
    assert summary["files"] == len(visible) == FILES, "maxRecordsPerFile=10"


def _partition_0_events(events: list[dict[str, Any]], group: str, kind: str) -> dict[int, dict[str, Any]]:
    """The `kind` event (SparkListenerTaskStart, ...TaskEnd) of every attempt of partition 0 in the
    jobs of `group`, by attempt number."""
    stages = {
        stage
        for event in events
        if event.get("Event") == "SparkListenerJobStart"
        and event.get("Properties", {}).get("spark.jobGroup.id") == group
        for stage in event["Stage IDs"]
    }
    return {
        event["Task Info"]["Attempt"]: event
        for event in events
        if event.get("Event") == kind and event["Stage ID"] in stages and event["Task Info"]["Index"] == 0
    }


def _task_ends_of_partition_0(events: list[dict[str, Any]], group: str) -> dict[int, dict[str, Any]]:
    return _partition_0_events(events, group, "SparkListenerTaskEnd")


def _task_starts_of_partition_0(events: list[dict[str, Any]], group: str) -> dict[int, dict[str, Any]]:
    return _partition_0_events(events, group, "SparkListenerTaskStart")


@pytest.mark.parametrize("name", KILLED_CONTAINER)
def test_a_killed_container_is_replaced_and_its_attempt_leaves_nothing(
    application: Application, name: str
) -> None:
    """The attempt that killed its executor had closed files (so there was output to lose); Spark
    saw the executor lost and accepted a later attempt of the task, in another container; the
    commit has none of the dead attempt's files (checked by the row counts and leftovers above,
    and here by the _SUCCESS job's own task attempts)."""
    killed = json.loads((application.markers / f"{name}.killed.json").read_text())
    assert len(killed["closed_files"]) == 4
    assert {path.split("/")[0] for path in killed["closed_files"]} == {"p=0", "p=1"}
    ends = _task_ends_of_partition_0(application.events, name)
    first = ends[0]
    assert first["Task End Reason"]["Reason"] == "ExecutorLostFailure", first
    assert first["Task Info"]["Task ID"] == killed["attempt_id"]
    accepted = [attempt for attempt, end in ends.items() if end["Task End Reason"]["Reason"] == "Success"]
    assert accepted and min(accepted) > 0, ends
    assert ends[min(accepted)]["Task Info"]["Executor ID"] != first["Task Info"]["Executor ID"]
    assert application.write(name)["retried_tasks"] >= 1
    dead = application.task_attempt_id(name, 0, killed["attempt_id"])
    assert application.lost_attempts(name)[dead].outcome == KILLED, "job commit found its files and no note"
    removed = [e for e in application.events if e.get("Event") == "SparkListenerExecutorRemoved"]
    assert any(e["Executor ID"] == first["Task Info"]["Executor ID"] for e in removed), removed


@pytest.mark.parametrize("name", SPECULATED)
def test_both_attempts_of_a_speculated_task_write_and_one_is_committed(
    application: Application, name: str
) -> None:
    """The straggler wrote, waited for its speculative copy (on the other host) to write, and
    committed its task; the copy wrote all its files and was then killed by Spark or found the
    task committed, and it adopted that commit or is in the job record as lost. Every row once
    and nothing left is checked above for this write too."""
    markers = {
        step: json.loads((application.markers / f"{name}.{step}.json").read_text())
        for step in ("straggler-waits", "copy-wrote", "copy-done", "straggler-committed")
    }
    assert markers["straggler-waits"]["attempt_number"] == 0
    assert len(markers["straggler-waits"]["closed_files"]) == 2
    assert markers["copy-wrote"]["attempt_number"] > 0
    assert len(markers["copy-done"]["closed_files"]) == FILES // 2, "the copy wrote all of its task's files"
    assert markers["copy-wrote"]["container_id"] != markers["straggler-waits"]["container_id"]
    ends = _task_ends_of_partition_0(application.events, name)
    starts = _task_starts_of_partition_0(application.events, name)
    copy = starts[markers["copy-wrote"]["attempt_number"]]["Task Info"]
    assert copy["Speculative"] is True
    assert copy["Host"] != starts[0]["Task Info"]["Host"]
    reasons = {ends[0]["Task End Reason"]["Reason"], ends[copy["Attempt"]]["Task End Reason"]["Reason"]}
    assert "Success" in reasons and reasons <= {"Success", "TaskKilled"}, reasons
    # Our task commit, not Spark, decided whose files are committed: the straggler's. Spark accepts
    # whichever attempt reports first: the straggler, or the copy with the straggler's commit,
    # adopted. A copy whose result was not taken is in the job record, lost to the straggler.
    straggler = application.task_attempt_id(name, 0, markers["straggler-waits"]["attempt_id"])
    copy_id = application.task_attempt_id(name, 0, markers["copy-wrote"]["attempt_id"])
    lost = application.lost_attempts(name)
    assert straggler not in lost
    if application.write(name)["adopted_tasks"] == 0:
        assert lost[copy_id].outcome in (REFUSED, SPECULATIVE_LOST, KILLED), lost[copy_id]
        assert lost[copy_id].winner in (None, straggler), lost[copy_id]
    else:
        assert copy_id not in lost


def test_the_executors_ran_on_both_hosts(application: Application) -> None:
    """What speculation needs: Spark never runs a copy of a task on a host where it runs."""
    added = [e for e in application.events if e.get("Event") == "SparkListenerExecutorAdded"]
    assert {e["Executor Info"]["Host"] for e in added} == HOSTS
