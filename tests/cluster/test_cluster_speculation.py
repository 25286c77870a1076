"""``write_committed`` on the real standalone cluster, with a real speculative task attempt.

spark-submit runs ``cluster_app.py`` against the master; its executors sit on 127.0.0.1 and
127.0.0.2. Attempt 0 of partition 0 is a straggler (it waits, after writing a file, until a copy of
itself has committed), so Spark's speculation launches a second attempt of the task on the other
host. The event log must show that attempt as ``"Speculative": true``, and the store must hold
exactly one copy of every row: the straggler's uploads and files are gone, nothing is pending.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from cluster_support import (
    assert_one_copy,
    assert_speculated,
    cluster_conf,
    read_marker,
    run_submit,
    spark_submit_command,
)
from support.standalone import StandaloneCluster

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.spark import config as cfg

ROWS = 2000
PARTITIONS = 4
SUBMIT_BOUND_SECONDS = 300.0


def test_speculative_attempt_leaves_one_copy(
    spark_cluster: StandaloneCluster,
    embedded_s3: EmbeddedS3,
    cluster_bucket: str,
    markers: Path,
    event_log_dir: Path,
    tmp_path: Path,
) -> None:
    from airflow_commit_provider.operators.spark_submit import build_py_files_zip

    committer = "magic"  # partitioned + replace speculates in test_cluster_operator_tries.py

    destination = StorePath("s3", cluster_bucket, f"tables/{committer}")
    job_id = str(uuid.uuid4())
    conf = {
        **cluster_conf(event_log_dir),
        cfg.CONF_DESTINATION: str(destination),
        cfg.CONF_COMMITTER: committer,
        cfg.CONF_JOB_ID: job_id,
    }
    app_args = [
        "--markers",
        str(markers),
        "--rows",
        str(ROWS),
        "--partitions",
        str(PARTITIONS),
        "--straggler",
    ]
    command = spark_submit_command(
        spark_cluster,
        conf,
        build_py_files_zip(tmp_path),
        app_args,
    )
    run_submit(command, embedded_s3, SUBMIT_BOUND_SECONDS)

    # Spark really speculated: a second attempt of partition 0, marked speculative, on the other host.
    assert_speculated(event_log_dir)
    # ... and the straggler and its copy both wrote files (the race was real).
    assert (markers / "attempt-try0-p0-0.json").exists() and (markers / "try0-p0-copy-committed").exists()

    result = read_marker(markers / "result-try0.json")
    assert result["ok"], result
    summary: dict[str, Any] = result["summary"]
    assert summary["job_id"] == job_id and summary["rows"] == ROWS and summary["tasks"] == PARTITIONS

    store = embedded_s3.store()
    try:
        success = assert_one_copy(store, destination, ROWS, job_id)
        assert success.committer == committer
        assert success.rows == ROWS
    finally:
        store.close()
