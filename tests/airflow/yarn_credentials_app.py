"""The PySpark application tests/airflow/test_yarn_credentials.py submits to YARN through
``CommittedSparkSubmitOperator``, once in client and once in cluster deploy mode:

    yarn_credentials_app.py RESULT_JSON

It writes rows ``id`` 0..99 with ``p = id % 2`` through ``write_committed(df)`` where the operator's
confs say, then, while the application still runs, looks for the S3 secret key it was given from
the driver and from a task in an executor's container, and records in RESULT_JSON (a local file:
every container of the test cluster is on this machine) what it found, never the secret itself:

- which credentials each found (boto3's source and the secret's SHA-256);
- every process's command line on the machine (``/proc/*/cmdline``), and which processes hold the
  secret in their environment (``/proc/*/environ``), each with whether it runs in a YARN container;
- the launch scripts (``launch_container.sh``: the environment YARN starts a container with) of
  this application's containers on the node;
- where the shipped credentials file was localised and its mode, and the mode of the
  application's staging folder in HDFS, where YARN took it from.

Then it reads the committed rows back through Hadoop's S3A (listing in the driver, reading in a
task), whose credential chain finds the same credentials as boto3 does in each place.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import boto3
from pyspark.sql import SparkSession

ROWS = 100
CREDENTIALS_FILE_NAME = "airflow-commit-aws-credentials"  # the hook's CREDENTIALS_FILE_NAME
CONF_DESTINATION = "spark.airflow_commit.destination"  # the operator's (spark.config.CONF_DESTINATION)


def own_secret() -> tuple[str | None, bytes | None]:
    """How boto3's default chain found this process's credentials, and their secret key."""
    credentials = boto3.Session().get_credentials()
    if credentials is None:
        return None, None
    return credentials.method, credentials.get_frozen_credentials().secret_key.encode()


def look_for(secret: bytes | None) -> dict[str, Any]:
    """Where `secret` shows in this machine's processes and this application's launch scripts."""
    found: dict[str, Any] = {"processes": 0, "in_cmdline": [], "in_environ": [], "launch_scripts": []}
    if secret is None:
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        found["processes"] += 1
        program = cmdline.split(b"\0", 1)[0].decode(errors="replace")
        if secret in cmdline:
            found["in_cmdline"].append({"pid": int(entry.name), "program": program})
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if secret in environ:
            in_container = any(v.startswith(b"CONTAINER_ID=") for v in environ.split(b"\0"))
            found["in_environ"].append(
                {"pid": int(entry.name), "program": program, "container": in_container}
            )
    container_id = os.environ.get("CONTAINER_ID")
    if container_id:  # the application's containers (all on one node: the DAG's sizes) are siblings
        for script in sorted(Path.cwd().parent.glob("container_*/launch_container.sh")):
            text = script.read_bytes()
            found["launch_scripts"].append(
                {
                    "container": script.parent.name,
                    "secret": secret in text,
                    "names_file": b"AWS_SHARED_CREDENTIALS_FILE" in text,
                }
            )
    return found


def report() -> dict[str, Any]:
    """What this process (the driver, or a task's Python worker) found."""
    method, secret = own_secret()
    shipped = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or CREDENTIALS_FILE_NAME)
    localised = shipped.resolve() if shipped.exists() else None
    return {
        "container_id": os.environ.get("CONTAINER_ID"),
        "credentials_file_variable": os.environ.get("AWS_SHARED_CREDENTIALS_FILE"),
        "credentials_method": method,
        "secret_sha256": hashlib.sha256(secret).hexdigest() if secret else None,
        "localised_file": str(localised) if localised else None,
        "localised_mode": oct(stat.S_IMODE(localised.stat().st_mode)) if localised else None,
        "found": look_for(secret),
    }


def in_task(_rows: object) -> list[dict[str, Any]]:
    return [report()]


def staging_modes(spark: SparkSession) -> dict[str, str]:
    """The modes of the application's staging folder in HDFS and of the credentials file in it,
    read through the driver's Hadoop FileSystem while the application runs."""
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(hadoop_conf)
    folder = jvm.org.apache.hadoop.fs.Path(
        fs.getHomeDirectory(), f".sparkStaging/{spark.sparkContext.applicationId}"
    )
    modes = {"folder": str(fs.getFileStatus(folder).getPermission().toString())}
    shipped = jvm.org.apache.hadoop.fs.Path(folder, CREDENTIALS_FILE_NAME)
    if fs.exists(shipped):
        modes["file"] = str(fs.getFileStatus(shipped).getPermission().toString())
    return modes


def main(result: Path) -> None:
    from airflow_commit_provider.spark import write_committed

    spark = SparkSession.builder.appName("tests-yarn-credentials").getOrCreate()
    try:
        df = spark.range(ROWS).selectExpr("id", "id % 2 AS p", "concat('row-', id) AS payload")
        summary = write_committed(df, format="parquet", partition_by="p")
        [executor] = spark.sparkContext.parallelize([0], 1).mapPartitions(in_task).collect()
        destination = spark.conf.get(CONF_DESTINATION)
        s3a_rows = spark.read.parquet(destination.replace("s3://", "s3a://", 1)).count()
        outcome = {
            "application_id": spark.sparkContext.applicationId,
            "s3a_rows": s3a_rows,
            "summary": summary.to_dict(),
            "driver": report(),
            "executor": executor,
            "staging": staging_modes(spark),
        }
        result.write_text(json.dumps(outcome))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
