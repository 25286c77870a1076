"""Spark's own ``df.write`` with Hadoop's S3A magic committer on the real standalone cluster, with a
real speculative duplicate of one task: what Hadoop's committer leaves, beside what ours leaves in
test_cluster_operator_tries.py (``write_committed``) and test_cluster_datasource_speculation.py
(``df.write.format("committed")``) under the same speculation settings (one copy, nothing left).

spark-submit runs ``s3a_speculation_app.py`` against the master; its executors sit on 127.0.0.1 and
127.0.0.2 and reach S3 through ``support.s3_gate``, which holds nothing here and only records the
requests in order. In each write, attempt 0 of partition 0 writes its first rows (a pending upload
and a ``.pending`` file each) and then waits in its JVM; Spark's speculation launches a copy on the
other host, which commits; the job commits; only then does the straggler go on (see the app).

What was observed (hadoop-aws 3.5.0, spark-hadoop-cloud 4.1.2, Spark 4.2.0):

- Spark lets only the copy commit (the straggler ends ``TaskKilled``): every row is read back once.
- With the defaults, job cleanup aborts every pending upload under the table, the straggler's
  included, and deletes ``__magic_job-*``: nothing is left.
- With ``fs.s3a.committer.abort.pending.uploads=false`` (Hadoop's advice when jobs may share a
  table), job cleanup deletes the straggler's ``.pending`` files with ``__magic_job-*`` but leaves
  its uploads; when the straggler is then stopped, its task abort finds no ``.pending`` file to
  abort: the uploads of the files it had closed stay pending for ever (billed storage, invisible to
  every reader and to ``_SUCCESS``). A documented Hadoop defect, asserted as observed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_support import (
    cluster_conf,
    read_marker,
    run_submit,
    spark_submit_command,
)
from support.one_copy import leftovers, read_ids
from support.s3_gate import Request, S3Gate
from support.spark_events import event_log
from support.standalone import StandaloneCluster

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf
from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf

APP = Path(__file__).resolve().parent / "s3a_speculation_app.py"
ROWS = 32
PARTITIONS = 4
#: Files the straggler closes before it waits (rows 0 and 1; row 2's file is still open).
STRAGGLER_CLOSED_FILES = 2
SUBMIT_BOUND_SECONDS = 300.0
WRITES = ("defaults", "keeping-uploads")


def attempts_of_partition_0(events: list[dict[str, Any]], stages: set[int]) -> dict[int, dict[str, Any]]:
    """TaskStart info and end reason of every attempt of partition 0 in `stages`, by attempt number."""
    found: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.get("Stage ID") not in stages or event["Task Info"]["Index"] != 0:
            continue
        if event.get("Event") == "SparkListenerTaskStart":
            found.setdefault(event["Task Info"]["Attempt"], {})["info"] = event["Task Info"]
        elif event.get("Event") == "SparkListenerTaskEnd":
            found.setdefault(event["Task Info"]["Attempt"], {})["end"] = event["Task End Reason"]["Reason"]
    return found


def pending_files_of(requests: list[Request], table: StorePath, task_id: int) -> list[str]:
    """The files (relative) whose ``.pending`` file the Spark task `task_id` wrote under the table,
    in `requests` (S3A's task attempt ID ends with Spark's task ID)."""
    return [
        request.key.rsplit("/__base/", 1)[1].removesuffix(".pending")
        for request in requests
        if request.method == "PUT"
        and request.key.startswith(f"{table.key}/")
        and f"_m_000000_{task_id}/__base/" in request.key
        and request.key.endswith(".pending")
    ]


def test_s3a_magic_speculative_duplicate(
    spark_cluster: StandaloneCluster,
    embedded_s3: EmbeddedS3,
    cluster_bucket: str,
    markers: Path,
    event_log_dir: Path,
    tmp_path: Path,
) -> None:
    from airflow_commit_provider.operators.spark_submit import build_py_files_zip

    tables = {name: StorePath("s3", cluster_bucket, f"tables/s3a-magic-{name}") for name in WRITES}
    urls = {name: f"s3a://{table.bucket}/{table.key}" for name, table in tables.items()}
    with S3Gate(embedded_s3.endpoint_url) as gate:
        through_gate = S3Settings(endpoint_url=gate.endpoint_url, region_name=embedded_s3.region)
        conf = {
            **cluster_conf(event_log_dir),
            **peer_spark_conf(peer_jars(), tmp_path),
            **jvm_committer_conf(urls["defaults"], "magic", store=through_gate),
        }
        app_args = ["--markers", str(markers), "--destination", urls["defaults"]]
        app_args += ["--destination-keeping-uploads", urls["keeping-uploads"]]
        app_args += ["--rows", str(ROWS), "--partitions", str(PARTITIONS)]
        submit = spark_submit_command(spark_cluster, conf, build_py_files_zip(tmp_path), APP, app_args)
        run_submit(submit, embedded_s3, SUBMIT_BOUND_SECONDS)
        requests = list(gate.requests)

    results: dict[str, Any] = read_marker(markers / "result.json")
    app_id = read_marker(markers / "started.json")["app_id"]
    events = event_log(event_log_dir, app_id)
    store = embedded_s3.store()
    try:
        for name in WRITES:
            result, table = results[name], tables[name]
            assert result["ok"] and not any(stage["active"] for stage in result["stages"]), (name, result)

            # Spark really speculated partition 0 and let only the copy commit.
            attempts = attempts_of_partition_0(events, {stage["stage"] for stage in result["stages"]})
            straggler, copy = attempts[0], attempts[1]
            assert copy["info"]["Speculative"] and copy["info"]["Host"] != straggler["info"]["Host"], attempts
            assert (straggler["end"], copy["end"]) == ("TaskKilled", "Success"), (name, attempts)

            # The straggler had written its first files before the job commit began.
            first_complete = next(
                position
                for position, request in enumerate(requests)
                if request.completes_upload and request.key.startswith(f"{table.key}/")
            )
            written = pending_files_of(requests[:first_complete], table, straggler["info"]["Task ID"])
            assert len(written) >= STRAGGLER_CLOSED_FILES, (name, written)

            assert read_ids(store, table) == list(range(ROWS)), f"{name}: not exactly one copy of every row"
            left = leftovers(store, table)
            assert left["temp trees"] == [] and left["hidden objects"] == [], (name, left)
            leaked = {upload.path.relative_to(table) for upload in store.list_multipart_uploads(table)}
            if name == "defaults":
                assert leaked == set(), leaked
            else:
                assert set(written) <= leaked, (leaked, written)
                assert all(key.startswith("part-00000-") for key in leaked), leaked
    finally:
        store.close()
