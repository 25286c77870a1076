"""The PySpark application of test_cluster_s3a_speculation.py: Spark's own ``df.write`` committed by
Hadoop's S3A magic committer, with a real speculative duplicate of one task.

    spark-submit s3a_speculation_app.py --markers DIR --destination s3a://BUCKET/KEY
        [--destination-keeping-uploads s3a://BUCKET/KEY2] [--rows N] [--partitions P]

The S3A committer conf comes with the submit (``jvm_committer_conf``, no credentials); the
credentials come from the driver's ``AWS_*`` environment and are set on the session at runtime, so
every task's Hadoop conf carries them and no command line does. The rows are ``id`` 0..N-1 in P
partitions, one file per row (``maxRecordsPerFile=1``). ``--destination-keeping-uploads``: then the
same write again, to that destination, with ``fs.s3a.committer.abort.pending.uploads=false``.

In each write, attempt 0 of partition 0, the straggler, stops at row ``GATE_ROW`` in its JVM
(``support.task_gate``), after it wrote the rows before it; every other attempt, its speculative
copy included, runs straight through. So Spark's speculation launches the copy on the other host,
the copy commits its task and the job commits while the straggler still waits. Then this driver
opens the gate and the straggler, which Spark meanwhile told to stop, goes on.

Markers in ``--markers`` (a local directory every process here sees): ``started.json`` (pid,
process group, application ID) when the driver starts; ``result.json`` at the end, per write: how
it ended, and its stages once no task of theirs runs (Spark does not wait for the killed straggler;
the driver does, so that its end is in the event log and the store is final).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# support.task_gate lives in tests/; the driver runs this file from tests/cluster.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.markers import write_marker
from support.spark_status import wait_until_no_task_runs
from support.task_gate import TaskGate

#: The straggler's row that waits at the gate (rows before it are written, one file each).
GATE_ROW = 3
#: Upper bound of every wait here (the test's own bound ends a broken run long before).
WAIT_BOUND_SECONDS = 240.0


def mark_the_straggler(batches: Iterator[Any]) -> Iterator[Any]:
    """Adds ``held``: true in attempt 0 of partition 0 only (runs in the executors' Python)."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    held = context.partitionId() == 0 and context.attemptNumber() == 0
    for batch in batches:
        yield pa.RecordBatch.from_arrays(
            [batch.column(0), pa.array([held] * batch.num_rows)], names=["id", "held"]
        )


def write_with_a_straggler(
    spark: Any, destination: str, args: argparse.Namespace, name: str
) -> dict[str, Any]:
    """One ``df.write`` whose partition 0 straggles at the gate ``<markers>/<name>-gate``; how it ended."""
    markers = Path(args.markers)
    gate = TaskGate(markers / f"{name}-gate")
    df = (
        spark.range(0, args.rows, 1, args.partitions)
        .mapInArrow(mark_the_straggler, "id long, held boolean")
        .selectExpr(
            "id", f"concat('row-', CAST(id AS STRING), {gate.column(f'held AND id = {GATE_ROW}')}) AS payload"
        )
    )
    spark.sparkContext.setJobGroup(name, f"write to {destination}")
    result: dict[str, Any] = {}
    try:
        df.write.option("maxRecordsPerFile", 1).mode("append").parquet(destination)
        result["ok"] = True
    except Exception as error:  # how the write ended is what the test checks
        result.update(ok=False, error=str(error)[:3000])
    finally:
        gate.open()
    result["stages"] = wait_until_no_task_runs(spark, WAIT_BOUND_SECONDS, name)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markers", required=True)
    parser.add_argument("--destination", required=True)
    parser.add_argument(
        "--destination-keeping-uploads", help="then the same with abort.pending.uploads=false"
    )
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    markers = Path(args.markers)
    spark = SparkSession.builder.appName("cluster-s3a-speculation").getOrCreate()
    spark.conf.set("fs.s3a.access.key", os.environ["AWS_ACCESS_KEY_ID"])
    spark.conf.set("fs.s3a.secret.key", os.environ["AWS_SECRET_ACCESS_KEY"])
    write_marker(
        markers / "started.json",
        {"pid": os.getpid(), "pgid": os.getpgid(0), "app_id": spark.sparkContext.applicationId},
    )
    results = {"defaults": write_with_a_straggler(spark, args.destination, args, "defaults")}
    if args.destination_keeping_uploads:
        spark.conf.set("fs.s3a.committer.abort.pending.uploads", "false")
        results["keeping-uploads"] = write_with_a_straggler(
            spark, args.destination_keeping_uploads, args, "keeping-uploads"
        )
    write_marker(markers / "result.json", results)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
