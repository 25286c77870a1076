"""The PySpark application of the durable-submission tests: a committed write, submitted by
``CommittedSparkSubmitOperator`` in YARN cluster mode, that can stop at a gate so a test can lose
its worker (or kill its try) while the application runs.

    spark-submit --deploy-mode cluster gated_yarn_app.py --markers DIR [--gate-on-try N]

Destination, committer and job ID come from the operator's ``spark.airflow_commit.*`` confs. It
writes ``id`` 0..ROWS-1 as parquet with ``write_committed``'s own writer. The driver runs in the
application master's container on this machine, so it meets the test in the local folder
``--markers``:

- ``started-try<N>.json`` when the driver starts: the application ID, the job ID;
- ``gate-try<N>.json`` once every task committed and before the job commits, on try ``--gate-on-try``
  only; the driver then waits for ``release-try<N>`` (bounded);
- ``result-try<N>.json`` at the end: the write summary, or the error that ended the write.

The container's working directory is not this folder: ``GATED_APP_TESTS_DIR`` (in the AM's
environment, ``spark.yarn.appMasterEnv.*``) names tests/ for ``support.markers``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("GATED_APP_TESTS_DIR", str(Path(__file__).resolve().parents[1])))

from support.markers import wait_for, write_marker

ROWS = 200
#: Upper bound of the wait at the gate (the test releases or kills the application long before).
GATE_BOUND_SECONDS = 600.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markers", required=True)
    parser.add_argument("--gate-on-try", type=int, default=0)
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from airflow_commit_provider.spark import plan_write
    from airflow_commit_provider.spark.config import CONF_JOB_ID, CONF_TRY_NUMBER, SparkConf
    from airflow_commit_provider.spark.instrumentation import WriteInstrumentation
    from airflow_commit_provider.spark.writer import run_write

    markers = Path(args.markers)
    spark = SparkSession.builder.appName("durable-gated-write").getOrCreate()
    try_number = int(spark.conf.get(CONF_TRY_NUMBER, "0") or 0)
    job_id = spark.conf.get(CONF_JOB_ID, "")
    write_marker(
        markers / f"started-try{try_number}.json",
        {"application_id": spark.sparkContext.applicationId, "job_id": job_id},
    )

    def gate(*_: object) -> None:
        if try_number == args.gate_on_try:
            write_marker(markers / f"gate-try{try_number}.json", {"job_id": job_id})
            if not wait_for(markers / f"release-try{try_number}", GATE_BOUND_SECONDS):
                raise SystemExit("the gate was never released")

    df = spark.range(0, ROWS, 1, 2).withColumn("payload", F.concat(F.lit("row-"), F.col("id").cast("string")))
    result = markers / f"result-try{try_number}.json"
    try:
        plan = plan_write(None, conf=SparkConf(spark), format="parquet")
        summary = run_write(df, plan, instrumentation=WriteInstrumentation(before_job_commit=gate))
    except BaseException as error:
        write_marker(result, {"ok": False, "error": type(error).__name__, "message": str(error)})
        raise
    write_marker(result, {"ok": True, "summary": summary.to_dict()})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
