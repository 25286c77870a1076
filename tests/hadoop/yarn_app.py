"""The PySpark application tests/hadoop submits to YARN: several ``write_committed`` jobs in one
application, each to its own destination, some with a fault injected into one task.

    spark-submit --master yarn ... yarn_app.py SPEC_JSON

SPEC_JSON (a local file) names the result file and the writes, in order: each has a ``name``, a
``destination`` (``s3://`` or ``hdfs://``), a ``committer`` and a ``fault``:

- ``none``: ``write_committed`` as a user calls it;
- ``kill-executor``: attempt 0 of partition 0, once it has closed `FILES_BEFORE_THE_KILL` files,
  SIGKILLs its executor's JVM (``YarnCoarseGrainedExecutorBackend``, the Python worker's ancestor)
  and exits: YARN reports the container lost, and Spark runs the task again in a new executor.
- ``speculate``: attempt 0 of partition 0, the straggler, once it has closed
  `STRAGGLER_FILES_BEFORE_THE_WAIT` files, waits until a speculative copy of its task (Spark runs
  one on the other host once the straggler has run ``spark.speculation.minTaskRuntime``) has
  closed a file; then it goes on and commits its task. The copy writes all its files and, before
  its task commit, waits until the straggler has committed: it then finds the task committed and
  discards its own output, or Spark kills it first. Both attempts write; one is committed.

Every write is rows ``id`` 0..ROWS-1 in two Spark partitions, ``p = id % 2`` (two table
partitions), parquet, at most `MAX_RECORDS_PER_FILE` rows a file; each runs in the Spark job
group of its name (the test finds its stages in the event log). The result file records the
Spark application ID, each write's summary (or its error), and where a task ran and imported this
package from. Markers of the injected faults go to the spec's ``markers`` folder.

Stores are reached with what the driver resolved: S3 from its ``AWS_*`` environment, HDFS from
its ``HADOOP_CONF_DIR`` (`TaskConfig.hdfs`); the executors' own environment is not consulted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

# support.markers lives in tests/; the driver runs this file from tests/hadoop.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.markers import ship_to_tasks, wait_for, write_marker
from support.spark_status import wait_until_no_task_runs

ROWS = 100
MAX_RECORDS_PER_FILE = 10
#: Files the killed attempt closes before it kills its executor: of the 6 it would write, the 3 of
#: its first table partition and 1 of its second.
FILES_BEFORE_THE_KILL = 4
#: Files the speculation write's straggler closes before it waits for its copy (of 6).
STRAGGLER_FILES_BEFORE_THE_WAIT = 2
#: Hang guard of the speculation write's waits (each ends on a marker long before).
WAIT_BOUND_SECONDS = 240.0
#: The executor JVM's main class on YARN, in its command line.
EXECUTOR_BACKEND = b"org.apache.spark.executor.YarnCoarseGrainedExecutorBackend"


def executor_jvm_pid() -> int:
    """The executor JVM above this Python worker (its parent is PySpark's daemon, whose parent is
    the JVM), found through ``/proc``."""
    pid = os.getppid()
    while pid > 1:
        if EXECUTOR_BACKEND in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no YarnCoarseGrainedExecutorBackend above this Python worker")


class KillExecutorAfterFiles:
    """``after_file`` hook: attempt 0 of partition 0 records its container and the files it has
    closed in `marker`, then SIGKILLs its executor JVM and exits without cleaning anything up."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.closed: list[str] = []

    def __call__(self, info: Any, relative_path: str) -> None:
        if info.partition != 0 or info.attempt_number != 0:
            return
        self.closed.append(relative_path)
        if len(self.closed) < FILES_BEFORE_THE_KILL:
            return
        jvm = executor_jvm_pid()
        write_marker(
            Path(self.marker),
            {
                "container_id": os.environ.get("CONTAINER_ID"),
                "executor_pid": jvm,
                "attempt_id": info.attempt_id,
                "closed_files": self.closed,
            },
        )
        os.kill(jvm, signal.SIGKILL)
        os._exit(1)


class SpeculationRendezvous:
    """``after_file``, ``before_commit`` and ``after_commit`` hooks of the speculation write: the
    straggler and its speculative copy each record what they did in a marker (``<prefix>.<step>.json``)
    and wait for the other's (see the module's docstring)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.closed: list[str] = []

    def _marker(self, step: str) -> Path:
        return Path(f"{self.prefix}.{step}.json")

    def _record(self, step: str, info: Any) -> None:
        write_marker(
            self._marker(step),
            {
                "attempt_id": info.attempt_id,
                "attempt_number": info.attempt_number,
                "container_id": os.environ.get("CONTAINER_ID"),
                "closed_files": self.closed,
            },
        )

    def _wait(self, step: str, info: Any) -> None:
        if not wait_for(self._marker(step), WAIT_BOUND_SECONDS):
            raise RuntimeError(f"attempt {info.attempt_id}: no {step} marker within {WAIT_BOUND_SECONDS} s")

    def after_file(self, info: Any, relative_path: str) -> None:
        if info.partition != 0:
            return
        self.closed.append(relative_path)
        if info.attempt_number == 0 and len(self.closed) == STRAGGLER_FILES_BEFORE_THE_WAIT:
            self._record("straggler-waits", info)
            self._wait("copy-wrote", info)
        elif info.attempt_number > 0 and len(self.closed) == 1:
            self._record("copy-wrote", info)

    def before_commit(self, info: Any) -> None:
        if info.partition == 0 and info.attempt_number > 0:
            self._record("copy-done", info)
            self._wait("straggler-committed", info)

    def after_commit(self, info: Any, _result: Any) -> None:
        if info.partition == 0 and info.attempt_number == 0:
            self._record("straggler-committed", info)


def _executor_origin(_rows: object) -> list[dict[str, str | None]]:
    """Where a task runs (YARN's container ID and working directory), where it imported this
    package from, and the HDFS settings its own environment would give (which it must not use)."""
    import airflow_commit_provider

    return [
        {
            "container_id": os.environ.get("CONTAINER_ID"),
            "cwd": os.getcwd(),
            "package": os.path.abspath(airflow_commit_provider.__file__ or ""),
            "HADOOP_CONF_DIR": os.environ.get("HADOOP_CONF_DIR"),
            "AIRFLOW_COMMIT_WEBHDFS_URL": os.environ.get("AIRFLOW_COMMIT_WEBHDFS_URL"),
        }
    ]


def run_one(spark: Any, write: dict[str, str], markers: Path) -> dict[str, Any]:
    """One write in its own job group; its summary, or the error it ended with."""
    from airflow_commit_provider.spark import write_committed
    from airflow_commit_provider.spark.instrumentation import TaskInstrumentation, WriteInstrumentation
    from airflow_commit_provider.spark.tables import plan_committed_write
    from airflow_commit_provider.spark.writer import run_write

    df = spark.range(0, ROWS, 1, 2).selectExpr("id", "id % 2 AS p", "concat('row-', id) AS payload")
    arguments: dict[str, Any] = {
        "format": "parquet",
        "partition_by": "p",
        "committer": write["committer"],
        "options": {"maxRecordsPerFile": MAX_RECORDS_PER_FILE},
    }
    spark.sparkContext.setJobGroup(
        write["name"], f"{write['name']}: write_committed to {write['destination']}"
    )
    try:
        if write["fault"] == "none":
            summary = write_committed(df, write["destination"], **arguments)
        elif write["fault"] == "kill-executor":
            hook = KillExecutorAfterFiles(str(markers / f"{write['name']}.killed.json"))
            plan = plan_committed_write(df, write["destination"], **arguments)
            summary = run_write(
                df, plan, instrumentation=WriteInstrumentation(task=TaskInstrumentation(after_file=hook))
            )
        elif write["fault"] == "speculate":
            rendezvous = SpeculationRendezvous(str(markers / write["name"]))
            probes = TaskInstrumentation(
                after_file=rendezvous.after_file,
                before_commit=rendezvous.before_commit,
                after_commit=rendezvous.after_commit,
            )
            plan = plan_committed_write(df, write["destination"], **arguments)
            summary = run_write(df, plan, instrumentation=WriteInstrumentation(task=probes))
        else:
            raise ValueError(f"unknown fault {write['fault']!r}")
        return {"summary": summary.to_dict()}
    except Exception as error:  # how the write ended is what the test checks
        return {"error": f"{type(error).__name__}: {error}"[:3000]}
    finally:
        # Spark does not wait for the attempts it killed (a losing copy); the store is final, and
        # their ends are in the event log, once none runs.
        wait_until_no_task_runs(spark, WAIT_BOUND_SECONDS, write["name"])


def main(spec_path: Path) -> None:
    from pyspark.sql import SparkSession

    spec = json.loads(spec_path.read_text())
    markers = Path(spec["markers"])
    ship_to_tasks()
    spark = SparkSession.builder.appName("tests-hadoop-yarn-app").getOrCreate()
    try:
        writes = {write["name"]: run_one(spark, write, markers) for write in spec["writes"]}
        spark.sparkContext.setJobGroup("executor-origin", "where a task runs")
        [executor] = spark.sparkContext.parallelize([0], 1).mapPartitions(_executor_origin).collect()
        write_marker(
            Path(spec["result"]),
            {"application_id": spark.sparkContext.applicationId, "writes": writes, "executor": executor},
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
