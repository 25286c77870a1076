"""The PySpark application of test_cluster_datasource_speculation.py: ``df.write.format(...)`` through
the ``committed`` data source's own code, with a speculative duplicate of one task.

    spark-submit datasource_app.py --markers DIR --destination URL --committer NAME --job-id ID
        [--rows N] [--partitions P]

The rows are ``id`` 0..N-1 with a payload, in P Spark partitions, appended as parquet. The source
is ``CommittedDataSource`` registered under another name (``committed_race``) with one change: its
writer runs the production ``CommittedWriter.write`` with task hooks (``TaskInstrumentation``, as
``cluster_app.py`` gives ``write_committed``). Driver side (``writer()`` planning and job setup,
``commit()``, ``abort()``) is the production code unchanged.

The hooks stage a race between partition 0's two attempts, each step waiting for the marker file
(in ``--markers``, which every process on the machine sees) of the step before it:

1. attempt 0, the straggler, writes its file (a pending upload with ``magic``), records
   ``attempt-p0-0.json`` and waits until its copy has committed, so Spark's speculation launches
   a copy of the task on the other host;
2. the speculative copy writes its file, records ``attempt-p0-<n>.json``, commits the task first
   (``copy-committed.json``), then holds its reply until the straggler has committed too;
3. the straggler commits: its exclusive task commit finds the task committed and adopts the copy's
   result (``straggler-adopted.json``); it then stays in the task until Spark ends it;
4. the copy returns its message; Spark's ``OutputCommitCoordinator`` authorises it, the task
   succeeds, and the scheduler kills the straggler (the other attempts of a task that succeeded,
   and the running attempts of a finished stage, are killed). Should the straggler outlive its
   bound instead, it writes ``straggler-not-killed.json`` and returns (then
   the coordinator, not the kill, would decide its fate).

``started.json`` records the application ID, ``result.json`` how ``save`` ended (and when it
returned), the write's stages once no task of theirs runs any more (``save`` does not wait for the
killed straggler to end; the driver waits for it, so that its end is in the event log), and whether
the straggler's Python process is still alive then (executors and driver share this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_commit_provider.spark.datasource import (
    CommittedDataSource,
    CommittedTaskMessage,
    CommittedWriter,
)

# support.markers lives in tests/; spark-submit runs this file from its own folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.markers import ship_to_tasks, wait_for, write_marker
from support.spark_status import wait_until_no_task_runs

#: The name the instrumented source is registered under (``committed`` stays the production one).
SOURCE_NAME = "committed_race"
#: The source's own option: the marker directory (removed before the production planning sees it).
MARKERS_OPTION = "race_markers"
#: Upper bound of every wait in the tasks (the test fails long before, on its own bound or checks).
WAIT_BOUND_SECONDS = 120.0


@dataclass(frozen=True)
class DuplicateRace:
    """Task hooks (pickled by value into the tasks) staging partition 0's race; see the module doc."""

    markers: str

    def _marker(self, name: str) -> Path:
        return Path(self.markers, name)

    def after_file(self, info: Any, relative: str) -> None:
        if info.partition != 0:
            return
        marker = self._marker(f"attempt-p0-{info.attempt_number}.json")
        if not marker.exists():
            write_marker(
                marker,
                {
                    "attempt_id": info.attempt_id,
                    "attempt_number": info.attempt_number,
                    "file": relative,
                    "executor_ip": os.environ.get("SPARK_LOCAL_IP"),
                    "pid": os.getpid(),
                },
            )
        if info.attempt_number == 0:
            wait_for(self._marker("copy-committed.json"), WAIT_BOUND_SECONDS)

    def after_commit(self, info: Any, result: Any) -> None:
        if info.partition != 0:
            return
        committed = {"attempt_id": info.attempt_id, "result": result.to_json() if result else None}
        if info.attempt_number > 0:  # the speculative copy: hold its reply until the straggler committed
            write_marker(self._marker("copy-committed.json"), committed)
            wait_for(self._marker("straggler-adopted.json"), WAIT_BOUND_SECONDS)
        elif self._marker("copy-committed.json").exists():  # the straggler, after its copy
            write_marker(self._marker("straggler-adopted.json"), committed)
            # Nothing ever writes this marker: the wait ends when Spark kills the task.
            if not wait_for(self._marker("never-released"), WAIT_BOUND_SECONDS):
                write_marker(self._marker("straggler-not-killed.json"), committed)


class RaceWriter(CommittedWriter):
    """The production writer; its task side runs with the race's hooks."""

    def __init__(self, base: CommittedWriter, probes: Any):
        super().__init__(base.plan, base.task_config, base.catalog)
        self.probes = probes

    def write(self, iterator: Iterator[Any]) -> CommittedTaskMessage:
        """``CommittedWriter.write`` itself, its ``run_task_attempt`` call given the hooks (the
        Python worker runs one task at a time; the module's function is restored after)."""
        from airflow_commit_provider.spark import datasource

        production = datasource.run_task_attempt
        probes = self.probes

        def instrumented(config: Any, info: Any, batches: Any, **kwargs: Any) -> Any:
            assert kwargs.get("instrumentation") is None, "the production write() passes no hooks"
            return production(config, info, batches, instrumentation=probes)

        datasource.run_task_attempt = instrumented
        try:
            return super().write(iterator)
        finally:
            datasource.run_task_attempt = production


class RaceDataSource(CommittedDataSource):
    """``committed`` under another name, whose tasks run the race's hooks."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def writer(self, schema: Any, overwrite: bool) -> RaceWriter:
        from airflow_commit_provider.spark.instrumentation import TaskInstrumentation

        markers = self.options[MARKERS_OPTION]
        del self.options[MARKERS_OPTION]
        race = DuplicateRace(markers)
        probes = TaskInstrumentation(after_file=race.after_file, after_commit=race.after_commit)
        return RaceWriter(super().writer(schema, overwrite), probes)


def process_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (this machine's /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markers", required=True)
    parser.add_argument("--destination", required=True)
    parser.add_argument("--committer", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=4)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    markers = Path(args.markers)
    spark = SparkSession.builder.appName("cluster-datasource-write").getOrCreate()
    ship_to_tasks()
    write_marker(
        markers / "started.json",
        {"pid": os.getpid(), "pgid": os.getpgid(0), "app_id": spark.sparkContext.applicationId},
    )
    spark.dataSource.register(RaceDataSource)
    df = spark.range(0, args.rows, 1, args.partitions).withColumn(
        "payload", F.concat(F.lit("row-"), F.col("id").cast("string"))
    )
    result = markers / "result.json"
    try:
        (
            df.write.format(SOURCE_NAME)
            .mode("append")
            .option("committer", args.committer)
            .option("job_id", args.job_id)
            .option(MARKERS_OPTION, str(markers))
            .save(args.destination)
        )
    except BaseException as error:
        write_marker(result, {"ok": False, "error": type(error).__name__, "message": str(error)})
        raise
    saved_ms = int(time.time() * 1000)
    # save() returns once every partition has one successful attempt and the job is committed: the
    # killed straggler may still be ending. Wait until no attempt of the write runs, so its end
    # reaches the event log; then say whether its Python process (the one running write()) is gone.
    stages = wait_until_no_task_runs(spark, WAIT_BOUND_SECONDS)
    straggler = markers / "attempt-p0-0.json"
    pid = json.loads(straggler.read_text())["pid"] if straggler.exists() else None
    write_marker(
        result,
        {
            "ok": True,
            "save_returned_ms": saved_ms,
            "stages": stages,
            "straggler_python_alive": process_alive(pid) if pid else None,
        },
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
