"""The PySpark application of the deployment's ``killed_write`` DAG: a small committed write that
can stop at a gate, so a test can SIGKILL the Airflow task process at a known point of the protocol.

    spark-submit gated_write_job.py --markers DIR [--gate before-commit|after-commit] [--gate-on-try N]

Destination, committer and job ID come from the operator's ``spark.airflow_commit.*`` confs. It
writes ``id`` 0..ROWS-1 with ``write_committed``'s own writer. Markers in ``--markers`` (a local
directory the test reads):

- ``started-try<N>.json`` when the driver starts: its pid and process group (spark-submit's);
- ``gate-<stage>-try<N>.json`` at the gate, which then waits for ``release-try<N>`` (bounded).
  ``before-commit``: every task committed (uploads pending), job commit not begun;
  ``after-commit``: the job committed, spark-submit not yet exited;
- ``result-try<N>.json`` at the end: the write summary, or the error that ended the write.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# support.markers lives in tests/; spark-submit runs this file from its own folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.markers import wait_for, write_marker

ROWS = 300
#: Upper bound of the wait at the gate (the test releases or kills the job long before).
GATE_BOUND_SECONDS = 300.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markers", required=True)
    parser.add_argument("--gate", choices=("before-commit", "after-commit", "none"), default="none")
    parser.add_argument("--gate-on-try", type=int, default=1)
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from airflow_commit_provider.spark import plan_write
    from airflow_commit_provider.spark.config import CONF_JOB_ID, CONF_TRY_NUMBER, SparkConf
    from airflow_commit_provider.spark.instrumentation import WriteInstrumentation
    from airflow_commit_provider.spark.writer import run_write

    markers = Path(args.markers)
    spark = SparkSession.builder.appName("deployment-gated-write").getOrCreate()
    try_number = int(spark.conf.get(CONF_TRY_NUMBER, "0") or 0)
    job_id = spark.conf.get(CONF_JOB_ID, "")
    write_marker(
        markers / f"started-try{try_number}.json",
        {"pid": os.getpid(), "pgid": os.getpgid(0), "job_id": job_id},
    )

    def gate(stage: str) -> None:
        if args.gate == stage and try_number == args.gate_on_try:
            write_marker(markers / f"gate-{stage}-try{try_number}.json", {"job_id": job_id})
            if not wait_for(markers / f"release-try{try_number}", GATE_BOUND_SECONDS):
                raise SystemExit(f"gate {stage}: never released")

    df = spark.range(0, ROWS, 1, 2).withColumn("payload", F.concat(F.lit("row-"), F.col("id").cast("string")))
    result = markers / f"result-try{try_number}.json"
    try:
        plan = plan_write(None, conf=SparkConf(spark), format="parquet")
        summary = run_write(
            df, plan, instrumentation=WriteInstrumentation(before_job_commit=lambda *_: gate("before-commit"))
        )
    except BaseException as error:
        write_marker(result, {"ok": False, "error": type(error).__name__, "message": str(error)})
        raise
    write_marker(result, {"ok": True, "summary": summary.to_dict()})
    gate("after-commit")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
