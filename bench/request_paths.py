"""Scenario: S3's two request paths (boto3 and AWS's CRT, `core/store/s3_requests.py`) in one run.

The CRT path (`core/store/s3_crt.py`, REST over awscrt) is kept only while it is clearly faster
than boto3's on what it is for (issue 29). So in one run, on one embedded S3 and one Spark
session, each path forced by `request_path`:

- job commit: our magic `commit_job` of `files` pending files (as `bench.job_commit` runs it: a
  fresh store and committer after the tasks ran), against the raw boto3 parallel
  CompleteMultipartUpload loop at the same thread count over uploads it holds in memory;
- a write: `write_committed(..., committer="magic")` of one DataFrame (parquet, snappy, 1 GiB at
  `full`), the tasks' parts and the driver's commit on the forced path (`s3.request_path`), against
  a raw pyarrow write of each partition to its final key with no commit (`bench.committers_s3`'s
  baseline).

Ratios per repetition against the baseline measured beside it (orders rotated), and the CRT's
time against boto3's directly. Target: the CRT path at most `TARGET_CRT_VS_BOTO3` of boto3's on
both; the host's load is in the result's environment.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from bench import s3_setup, spark_tasks
from bench.common import ARROW_BYTE_CHECK_OFF, BenchEnv, ScenarioResult, log, new_id, rotated, timer
from bench.job_commit import PAYLOAD, ours_job_commit, ours_pending_job

PATHS = ("crt", "boto3")
#: "Clearly faster": the CRT path's time at most this fraction of boto3's.
TARGET_CRT_VS_BOTO3 = 0.8
PARTITIONS = {"tiny": 2, "small": 4, "full": 8}


def run(env: BenchEnv) -> ScenarioResult:
    files = env.pick(tiny=20, small=1000, full=1000)
    target_bytes = env.pick(tiny=1024**2, small=256 * 1024**2, full=1024**3)
    result = ScenarioResult(
        "request_paths",
        "S3 request paths: boto3 and the CRT, job commit and a magic write, in one run",
        env.size,
        env.repeat,
        parameters={
            "files": files,
            "write_bytes": target_bytes,
            "spark_partitions": PARTITIONS[env.size],
            "threads": env.threads,
            "committer": "magic",
            "paths": list(PATHS),
            "job commit baseline": "raw boto3 CompleteMultipartUpload loop, same thread count",
            "write baseline": "raw pyarrow S3FileSystem write of each partition to its final key (no commit)",
        },
    )
    _job_commit(env, result, files)
    _write(env, result, target_bytes)
    return result


def _job_commit(env: BenchEnv, result: ScenarioResult, files: int) -> None:
    label = f"{files:,} files"
    for path in PATHS:
        result.comparison(
            f"magic job commit on {path}, {label}",
            ours_label=f"commit_job ({path})",
            baseline_label="raw parallel CompleteMultipartUpload (boto3)",
            unit="s",
            group="request_paths_job_commit",
        )
    crt_vs_boto3 = result.comparison(
        f"job commit: crt vs boto3, {label}",
        ours_label="commit_job (crt)",
        baseline_label="commit_job (boto3)",
        unit="s",
        target=TARGET_CRT_VS_BOTO3,
        group="request_paths",
    )
    for rep in range(env.repeat):
        buckets = {name: env.new_bucket(f"rp-{name}") for name in (*PATHS, "raw")}
        setup_store = env.s3.store(max_pool_connections=s3_setup.SETUP_THREADS + 4)
        setup_client = s3_setup.raw_client(env.s3, s3_setup.SETUP_THREADS)
        try:
            jobs = {path: ours_pending_job(env, "magic", setup_store, buckets[path], files) for path in PATHS}
            uploads = s3_setup.create_raw_uploads(setup_client, buckets["raw"], "out", files, PAYLOAD)
            seconds: dict[str, float] = {}
            for name in rotated([*PATHS, "raw"], rep):
                if name == "raw":
                    client = s3_setup.raw_client(env.s3, env.threads)
                    try:
                        with timer() as elapsed:
                            s3_setup.complete_raw(client, buckets["raw"], uploads, env.threads)
                    finally:
                        client.close()
                    seconds[name] = elapsed()
                else:
                    destination, job_id, results = jobs[name]
                    seconds[name], cpu, _counters, _phases = ours_job_commit(
                        env, "magic", name, destination, job_id, results, files, time.process_time
                    )
                    result.measure(f"job commit client CPU seconds ({name}), {label}", cpu)
            for path in PATHS:
                result.comparison(f"magic job commit on {path}, {label}").add(seconds[path], seconds["raw"])
            crt_vs_boto3.add(seconds["crt"], seconds["boto3"])
            log(f"request_paths: job commit {label}: {seconds}")
        finally:
            setup_store.close()
            setup_client.close()
            for bucket in buckets.values():
                env.drop_bucket(bucket)


def _write(env: BenchEnv, result: ScenarioResult, target_bytes: int) -> None:
    spark = env.spark
    partitions = PARTITIONS[env.size]
    frame = spark_tasks.make_frame(spark, target_bytes, partitions)
    label = f"{target_bytes / 1024**2:,.0f} MiB"
    arrow_s3 = {
        "endpoint": env.s3.endpoint_url,
        "access_key": env.s3.access_key,
        "secret_key": env.s3.secret_key,
        "region": env.s3.region,
    }

    def write(name: str, data: Any, bucket: str) -> float:
        prefix = new_id(name)
        if name == "raw":
            task = functools.partial(
                spark_tasks.raw_parquet_task, bucket, prefix, arrow_s3, "snappy", spark_tasks.ROW_GROUP_BYTES
            )
            with applied_conf(spark, ARROW_BYTE_CHECK_OFF), timer() as elapsed:
                data.mapInArrow(task, spark_tasks.RAW_RESULT_SCHEMA).collect()
            return elapsed()
        with timer() as elapsed:
            write_committed(
                data,
                f"s3://{bucket}/{prefix}",
                format="parquet",
                committer="magic",
                options={
                    **env.s3_options(),
                    "threads": env.threads,
                    "compression": "snappy",
                    "s3.request_path": name,
                },
            )
        return elapsed()

    for path in PATHS:
        result.comparison(
            f"magic write on {path}, {label}",
            ours_label=f"write_committed(magic, {path})",
            baseline_label="raw pyarrow write",
            unit="s",
            group="request_paths_write",
        )
    crt_vs_boto3 = result.comparison(
        f"magic write: crt vs boto3, {label}",
        ours_label="write_committed(magic, crt)",
        baseline_label="write_committed(magic, boto3)",
        unit="s",
        target=TARGET_CRT_VS_BOTO3,
        group="request_paths",
    )
    names = [*PATHS, "raw"]
    if env.size != "tiny":  # warm-up, not measured: Python workers, imports, each path's first connections
        bucket = env.new_bucket("rp-warmup")
        try:
            small = spark_tasks.make_frame(spark, 256 * 1024, partitions)
            for name in names:
                write(name, small, bucket)
        finally:
            env.drop_bucket(bucket)
    for rep in range(env.repeat):
        bucket = env.new_bucket("rp-write")
        try:
            seconds = {name: write(name, frame, bucket) for name in rotated(names, rep)}
        finally:
            env.drop_bucket(bucket)
        for path in PATHS:
            result.comparison(f"magic write on {path}, {label}").add(seconds[path], seconds["raw"])
        crt_vs_boto3.add(seconds["crt"], seconds["boto3"])
        log(f"request_paths: write {label}: {seconds}")
