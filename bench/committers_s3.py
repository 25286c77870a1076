"""Scenario 2: the committers on S3, end to end, for the same PySpark write.

`write_committed` of one DataFrame (parquet, snappy) with `magic`, `directory` and `partitioned`
(zero-copy: pending multipart uploads completed at job commit) and `file-v1` (rename = copy +
delete on S3, twice per file). The limit: the same Spark job writing each partition straight to
its final key with pyarrow's own S3 filesystem, uncommitted (`bench.spark_tasks.raw_parquet_task`),
its `mapInArrow` with Spark's per-row Arrow batch measurement off as `write_committed`'s jobs have it.
Measured per write: total time, job-commit time, bytes copied (the stores' own counters, in the
driver and inside every task, as the job's `_SUCCESS` reports them in its `iostatistics`). Targets:
magic at most 1.0× of the raw write (its parts upload while the task encodes the next, as
pyarrow's do), directory and partitioned within 1.2×.

The write is unpartitioned and in `append` mode for every committer: in append mode `partitioned`
and `directory` do the same work (they differ only in how `fail`/`replace` resolve conflicts), and
the raw baseline writes one file per task with no partition columns either.

`BENCH_PARTS_IN_FLIGHT` sets the magic stream's `parts_in_flight` (default: the committer's), to
compare overlapped part uploads with synchronous ones (1).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from airflow_commit_provider.success.check import load_success
from bench import spark_tasks
from bench.common import ARROW_BYTE_CHECK_OFF, BenchEnv, ScenarioResult, log, new_id, rotated, timer

TARGET_RATIO = 1.2
MAGIC_TARGET_RATIO = 1.0
OURS = ("magic", "directory", "partitioned")
BASELINE_COMMITTER = "file-v1"


def run(env: BenchEnv) -> ScenarioResult:
    target_bytes = env.pick(tiny=1024**2, small=256 * 1024**2, full=1024**3)
    partitions = env.pick(tiny=2, small=4, full=8)
    parts_in_flight = int(os.environ.get("BENCH_PARTS_IN_FLIGHT", CommitOptions().parts_in_flight))
    result = ScenarioResult(
        "committers_s3",
        "Committers on S3, end to end (PySpark write, embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "target_bytes": target_bytes,
            "spark_partitions": partitions,
            "format": "parquet (snappy)",
            "committers": [*OURS, BASELINE_COMMITTER],
            "baseline": "raw pyarrow S3FileSystem write of each partition to its final key (no commit)",
            "threads": env.threads,
            "parts_in_flight": parts_in_flight,
        },
    )
    if env.size != "full":
        result.notes.append(
            f"size {env.size}: about {target_bytes / 1024**2:.0f} MiB per write; `--size full` writes 1 GiB"
        )
    spark = env.spark
    df = spark_tasks.make_frame(spark, target_bytes, partitions)
    s3_options = env.s3_options()
    arrow_s3 = {
        "endpoint": env.s3.endpoint_url,
        "access_key": env.s3.access_key,
        "secret_key": env.s3.secret_key,
        "region": env.s3.region,
    }
    variants = [*OURS, BASELINE_COMMITTER, "raw"]

    def write(name: str, frame: Any, bucket: str) -> tuple[float, Any, dict[str, int]]:
        """One write of `frame` with committer `name` (or the raw baseline): seconds, summary, copies."""
        prefix = new_id(name.replace("-", ""))
        if name == "raw":
            with applied_conf(spark, ARROW_BYTE_CHECK_OFF), timer() as elapsed:
                rows = frame.mapInArrow(
                    functools.partial(
                        spark_tasks.raw_parquet_task,
                        bucket,
                        prefix,
                        arrow_s3,
                        "snappy",
                        spark_tasks.ROW_GROUP_BYTES,
                    ),
                    spark_tasks.RAW_RESULT_SCHEMA,
                ).collect()
            return elapsed(), sum(row["bytes"] for row in rows), {}
        with timer() as elapsed:
            summary = write_committed(
                frame,
                f"s3://{bucket}/{prefix}",
                format="parquet",
                committer=name,
                options={
                    **s3_options,
                    "threads": env.threads,
                    "compression": "snappy",
                    "parts_in_flight": parts_in_flight,
                },
            )
        with env.s3.store().session() as store:
            counters = load_success(store, summary.success_file).iostatistics.counters
        return elapsed(), summary, counters

    if env.size != "tiny":  # the smoke test only checks that the scenario runs
        # Warm-up (not measured): Python workers, imports, JIT, the first connections of each path.
        bucket = env.new_bucket("cs3-warmup")
        try:
            small = spark_tasks.make_frame(spark, 256 * 1024, partitions)
            for name in variants:
                write(name, small, bucket)
        finally:
            env.drop_bucket(bucket)

    for rep in range(env.repeat):
        bucket = env.new_bucket("cs3")
        try:
            order = rotated(variants, rep)
            seconds: dict[str, float] = {}
            for name in order:
                seconds[name], summary, copies = write(name, df, bucket)
                if name == "raw":
                    result.measure("total seconds, raw", seconds[name])
                    result.measure("bytes written, raw", summary, "bytes")
                    log(f"committers_s3: raw pyarrow write {summary / 1e6:.0f} MB in {seconds[name]:.1f} s")
                else:
                    _record_write(result, name, summary, seconds[name], copies)
            for ours in OURS:
                result.comparison(
                    f"{ours} vs raw write",
                    ours_label=f"write_committed({ours})",
                    baseline_label="raw pyarrow write",
                    unit="s",
                    target=MAGIC_TARGET_RATIO if ours == "magic" else TARGET_RATIO,
                    group="committers_s3",
                ).add(seconds[ours], seconds["raw"])
            result.comparison(
                f"{BASELINE_COMMITTER} vs raw write",
                ours_label=f"write_committed({BASELINE_COMMITTER})",
                baseline_label="raw pyarrow write",
                unit="s",
                group="committers_s3",
            ).add(seconds[BASELINE_COMMITTER], seconds["raw"])
            for ours in OURS:
                result.comparison(
                    f"{ours} vs {BASELINE_COMMITTER}",
                    ours_label=f"write_committed({ours})",
                    baseline_label=f"write_committed({BASELINE_COMMITTER})",
                    unit="s",
                    group="committers_s3",
                ).add(seconds[ours], seconds[BASELINE_COMMITTER])
        finally:
            env.drop_bucket(bucket)
    return result


def _record_write(
    result: ScenarioResult, name: str, summary: Any, seconds: float, copies: dict[str, int]
) -> None:
    result.measure(f"total seconds, {name}", seconds)
    result.measure(f"job commit seconds, {name}", summary.job_commit_seconds)
    result.measure(f"bytes written, {name}", summary.bytes, "bytes")
    result.measure(f"files, {name}", summary.files, "files")
    copied = copies.get("bytes_copied", 0)
    result.check(
        f"bytes copied, {name}",
        unit="bytes",
        target=None if name == BASELINE_COMMITTER else 0,
        note="S3 CopyObject bytes in the _SUCCESS iostatistics: the driver's and every committed task's",
    ).values.append(copied)
    log(
        f"committers_s3: {name}: {summary.bytes / 1e6:.0f} MB, {summary.files} files in {seconds:.1f} s "
        f"(job commit {summary.job_commit_seconds:.2f} s), copied {copied / 1e6:.0f} MB"
    )
