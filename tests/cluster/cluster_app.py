"""The PySpark application the cluster tests submit: ``write_committed`` with observable gates.

    spark-submit cluster_app.py --markers DIR [--rows N] [--partitions P] [--straggler] [--partitioned]
        [--gate before-commit|after-commit --gate-on-try N]

Destination, committer, conflict mode and job ID come from the ``spark.airflow_commit.*`` confs
(``CommittedSparkSubmitOperator`` sets them), S3 access from the
``AWS_*`` environment. The rows are ``id`` 0..N-1 with a payload, in P Spark partitions, written as
parquet. Everything the tests synchronise on is a file this application writes in ``--markers``
(a local directory every process on the machine sees):

- ``started-try<N>.json`` when the driver starts: its pid, process group and Spark application ID;
- ``gate-<stage>-try<N>.json`` when it reaches the gate; it then waits for ``release-try<N>`` to
  appear (bounded by GATE_BOUND_SECONDS) before going on. ``before-commit``: every task committed,
  job commit not begun (so a killed Airflow try leaves a live orphan that can still commit);
  ``after-commit``: the job committed, spark-submit not yet exited;
- ``result-try<N>.json`` at the end: the write summary, or the error that ended the write.

``--straggler``: attempt 0 of partition 0 is a straggler. After writing its first file it waits
until another attempt of partition 0 (a speculative copy, on the other host) has committed, or the
bound expires; every attempt of partition 0 records itself as ``attempt-try<N>-p0-<n>.json``,
and the copy that commits writes ``try<N>-p0-copy-committed``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# support.markers lives in tests/; spark-submit runs this file from its own folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.markers import ship_to_tasks, wait_for, write_marker

#: Upper bound of every wait in this application (the tests release or kill it long before).
GATE_BOUND_SECONDS = 300.0
#: How long the straggler waits for its speculative copy before giving up (the test then fails).
STRAGGLER_BOUND_SECONDS = 120.0


@dataclass(frozen=True)
class Straggler:
    """Task hook (pickled by value into the tasks): partition 0's first attempt waits for a copy."""

    markers: str
    try_number: int

    def after_file(self, info: Any, _relative: str) -> None:
        if info.partition != 0:
            return
        marker = Path(self.markers, f"attempt-try{self.try_number}-p0-{info.attempt_number}.json")
        if not marker.exists():
            write_marker(
                marker,
                {
                    "attempt_id": info.attempt_id,
                    "attempt_number": info.attempt_number,
                    "executor_ip": os.environ.get("SPARK_LOCAL_IP"),
                    "pid": os.getpid(),
                },
            )
        if info.attempt_number == 0:
            wait_for(Path(self.markers, f"try{self.try_number}-p0-copy-committed"), STRAGGLER_BOUND_SECONDS)
        else:
            # On a loaded machine Spark can speculate attempt 0 before it writes anything; the copy
            # waits for the straggler's first file, so both really race.
            wait_for(Path(self.markers, f"attempt-try{self.try_number}-p0-0.json"), STRAGGLER_BOUND_SECONDS)

    def after_commit(self, info: Any, _result: Any) -> None:
        if info.partition == 0 and info.attempt_number > 0:
            write_marker(
                Path(self.markers, f"try{self.try_number}-p0-copy-committed"), {"attempt_id": info.attempt_id}
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markers", required=True)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--straggler", action="store_true")
    parser.add_argument("--partitioned", action="store_true", help="partition by part = id % 2")
    parser.add_argument("--gate", choices=("before-commit", "after-commit"))
    parser.add_argument("--gate-on-try", type=int, default=-1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from airflow_commit_provider.spark import plan_write
    from airflow_commit_provider.spark.config import CONF_JOB_ID, CONF_TRY_NUMBER, SparkConf
    from airflow_commit_provider.spark.instrumentation import TaskInstrumentation, WriteInstrumentation
    from airflow_commit_provider.spark.writer import run_write

    markers = Path(args.markers)
    spark = SparkSession.builder.appName("cluster-committed-write").getOrCreate()
    ship_to_tasks()
    try_number = int(spark.conf.get(CONF_TRY_NUMBER, "0") or 0)
    job_id = spark.conf.get(CONF_JOB_ID, "")
    write_marker(
        markers / f"started-try{try_number}.json",
        {
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "app_id": spark.sparkContext.applicationId,
            "job_id": job_id,
        },
    )
    gated = args.gate is not None and try_number == args.gate_on_try

    def gate(stage: str) -> None:
        if gated and args.gate == stage:
            write_marker(markers / f"gate-{stage}-try{try_number}.json", {"job_id": job_id})
            if not wait_for(markers / f"release-try{try_number}", GATE_BOUND_SECONDS):
                raise SystemExit(f"gate {stage}: never released")

    task_probes = None
    if args.straggler:
        straggler = Straggler(str(markers), try_number)
        task_probes = TaskInstrumentation(
            after_file=straggler.after_file, after_commit=straggler.after_commit
        )
    instrumentation = WriteInstrumentation(
        task=task_probes, before_job_commit=lambda *_: gate("before-commit")
    )

    df = spark.range(0, args.rows, 1, args.partitions).withColumn(
        "payload", F.concat(F.lit("row-"), F.col("id").cast("string"))
    )
    partition_by: list[str] = []
    if args.partitioned:
        df = df.withColumn("part", (F.col("id") % 2).cast("string"))
        partition_by = ["part"]
    result = markers / f"result-try{try_number}.json"
    try:
        plan = plan_write(None, conf=SparkConf(spark), format="parquet", partition_by=partition_by)
        summary = run_write(df, plan, instrumentation=instrumentation)
    except BaseException as error:
        write_marker(result, {"ok": False, "error": type(error).__name__, "message": str(error)})
        raise
    write_marker(result, {"ok": True, "summary": summary.to_dict()})
    print(json.dumps({"write_committed": summary.to_dict()}, default=str))
    gate("after-commit")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
