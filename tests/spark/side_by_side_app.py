"""The Spark driver that test_side_by_side_killed.py kills: Hadoop's S3A magic committer and ours,
writing through an S3 gate (``support.s3_gate``) that the test holds and releases.

    python side_by_side_app.py SPEC.json

SPEC (JSON): ``markers`` (a directory), ``endpoint`` (the gate's URL), ``region``, ``orphans``
(``name -> s3a:// destination``), ``killed_hadoop`` (an ``s3a://`` destination), ``killed_ours``
(an ``s3://`` destination) and ``ours_job_id``. Credentials come from the ``AWS_*`` environment,
for S3A and ours alike. Its own ``local[4]`` session has Hadoop's jars on its classpath and S3A
pointed at the gate, with the S3A magic committer bound through Spark's cloud commit protocol.

1. **Orphans.** One ``df.write`` per entry of ``orphans``, in threads: the jobs of a try whose
   Airflow worker died. The test holds each job at its first ``CompleteMultipartUpload`` (every
   task committed, nothing visible), runs the retry beside it and releases it; each write's end
   is recorded in ``orphan-<name>.json`` (``ok``, or the error that ended it).
2. Waits for the marker ``go-kill``, then **killed**: the S3A magic write to ``killed_hadoop`` and
   ``write_committed`` (magic) to ``killed_ours``, in threads. The test holds both job commits after
   their first completed upload and SIGKILLs this process group; nothing here ever ends them.

Each write is ``id`` 0..n-1 in 2 tasks, one row per file (``maxRecordsPerFile=1``), so every row is
one upload and one visible object.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

# support.markers lives in tests/; spark-submit runs this file from its own folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.markers import wait_for, write_marker
from support.spark_apps import LOCAL_APP_CONF

#: Upper bound of every wait here (the test releases or kills this process long before).
WAIT_BOUND_SECONDS = 300.0
ROWS_PER_ORPHAN = 4
ROWS_PER_KILLED = 8


def rows(spark: Any, count: int) -> Any:
    """``id`` 0..count-1 in two Spark partitions."""
    return spark.range(count, numPartitions=2)


def session(spec: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.core.store.settings import S3Settings
    from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf
    from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf

    # S3A takes the credentials from the AWS_* environment (its default chain).
    gate = S3Settings(endpoint_url=spec["endpoint"], region_name=spec["region"])
    committer = jvm_committer_conf(spec["killed_hadoop"], "magic", store=gate)
    spark = (
        SparkSession.builder.master("local[4]")
        .appName("side-by-side-killed")
        .config(map=peer_spark_conf(peer_jars(), Path(spec["markers"])))
        .config(map=committer)
        .config(map=LOCAL_APP_CONF)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    return spark


def in_thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[1]).read_text())
    markers = Path(spec["markers"])
    spark = session(spec)

    def orphan(name: str, destination: str) -> None:
        try:
            rows(spark, ROWS_PER_ORPHAN).write.option("maxRecordsPerFile", 1).mode("append").parquet(
                destination
            )
            outcome: dict[str, Any] = {"ok": True}
        except Exception as error:  # the orphan's end is what the test observes
            outcome = {"ok": False, "error": str(error)[:2000]}
        write_marker(markers / f"orphan-{name}.json", outcome)

    for thread in [in_thread(orphan, name, dest) for name, dest in spec["orphans"].items()]:
        thread.join(WAIT_BOUND_SECONDS)

    if not wait_for(markers / "go-kill", WAIT_BOUND_SECONDS):
        raise SystemExit("never told to start the writes that get killed")
    from airflow_commit_provider.spark import write_committed
    from airflow_commit_provider.spark.config import CONF_JOB_ID

    spark.conf.set(CONF_JOB_ID, spec["ours_job_id"])
    options = {"s3.endpoint_url": spec["endpoint"], "s3.region": spec["region"], "maxRecordsPerFile": 1}
    hadoop = in_thread(
        lambda: (
            rows(spark, ROWS_PER_KILLED).write.option("maxRecordsPerFile", 1).parquet(spec["killed_hadoop"])
        )
    )
    ours = in_thread(
        lambda: write_committed(
            rows(spark, ROWS_PER_KILLED), spec["killed_ours"], committer="magic", options=options
        )
    )
    for thread in (hadoop, ours):
        thread.join(WAIT_BOUND_SECONDS)
    raise SystemExit("the writes the test kills ended on their own")


if __name__ == "__main__":
    main(sys.argv)
