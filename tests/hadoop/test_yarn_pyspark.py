"""A PySpark application on the test YARN cluster in client deploy mode, writing through
``write_committed`` to the embedded S3 (issue 31, item 4's first slice). The committer is
``magic``, what an S3 append gets by default: the manifest committer needs a store with atomic
rename and refuses S3 (``UnsupportedStoreError``), so its YARN run waits for ``hdfs://``.

It shows what a YARN job needs from us, as the operator would submit it: the executors run in
YARN containers and import this package from the ``--py-files`` zip the operator builds
(``operators.submission.shipped_py_files``), and the tasks reach the store with the settings the
driver resolved from its environment. The committed rows are read back from S3 with pyarrow.

Cost: one spark-submit, about 60 s on the shared 2 cores (the AM and one 512m executor, about
1.5 GB above the cluster); the session's cluster and embedded S3 besides.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests

from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
from airflow_commit_provider.devtools.yarn_apps import yarn_conf
from airflow_commit_provider.operators.submission import shipped_py_files

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("yarn_app.py")
VENV_BIN = Path(sys.executable).parent
#: Bound of the one spark-submit (a hang fails the test instead of the lane).
SUBMIT_BOUND_SECONDS = 420


def test_client_mode_application_commits_to_s3(
    hadoop_cluster: HadoopCluster, embedded_s3: EmbeddedS3, tmp_path: Path
) -> None:
    bucket = embedded_s3.create_bucket(f"yarn-{uuid.uuid4().hex[:12]}")
    destination = f"s3://{bucket}/tables/events"
    result = tmp_path / "result.json"
    py_files = shipped_py_files(None, True, tmp_path)
    assert py_files is not None
    command = [str(VENV_BIN / "spark-submit"), "--master", "yarn", "--deploy-mode", "client"]
    command += ["--py-files", py_files]
    # The containers run this venv's Python (boto3, pyarrow): every container is on this machine.
    for key, value in {**yarn_conf(), "spark.pyspark.python": sys.executable}.items():
        command += ["--conf", f"{key}={value}"]
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env |= embedded_s3.env() | hadoop_cluster.env()
    env |= {"SPARK_LOCAL_IP": "127.0.0.1", "PATH": os.pathsep.join([str(VENV_BIN), env.get("PATH", "")])}

    process = subprocess.Popen(
        [*command, str(APP), destination, "magic", str(result)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=SUBMIT_BOUND_SECONDS)
    finally:
        with contextlib.suppress(ProcessLookupError):  # executors' Python workers can outlive the driver
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, output[-5000:]

    outcome = json.loads(result.read_text())
    app = requests.get(
        f"{hadoop_cluster.rm_webapp_url}/ws/v1/cluster/apps/{outcome['application_id']}", timeout=30
    ).json()["app"]
    assert (app["applicationType"], app["state"]) == ("SPARK", "FINISHED")
    # A task ran in a container of this application, under the cluster's NodeManager, and imported
    # the package from the zip shipped into that container.
    executor = outcome["executor"]
    assert hadoop_cluster.directory is not None
    assert executor["container_id"].startswith(
        "container_" + outcome["application_id"].removeprefix("application_")
    )
    assert Path(executor["cwd"]).is_relative_to(hadoop_cluster.directory)
    assert (
        executor["package"] == f"{executor['cwd']}/{Path(py_files).name}/airflow_commit_provider/__init__.py"
    )

    client = embedded_s3.client()
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="tables/events/")
        for item in page.get("Contents", [])
    ]
    # What a reader sees: the job's records (RECORDS_DIR) and markers are hidden by their `_` prefix.
    data = sorted(key for key in keys if not any(part.startswith(("_", ".")) for part in key.split("/")))
    assert {key.split("/")[2] for key in data} == {"p=0", "p=1"}
    assert all(key.endswith(".parquet") for key in data)
    assert "tables/events/_SUCCESS" in keys
    assert outcome["summary"]["committer"] == "magic"
    assert outcome["summary"]["files"] == len(data)
    rows = []
    for key in data:
        table = pq.read_table(io.BytesIO(client.get_object(Bucket=bucket, Key=key)["Body"].read()))
        partition = int(key.split("/")[2].removeprefix("p="))
        rows += [(row["id"], partition, row["payload"]) for row in table.to_pylist()]
    assert sorted(rows) == [(i, i % 2, f"row-{i}") for i in range(100)]
