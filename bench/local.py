"""Scenario 3: the local filesystem (file://), one DataFrame, our manifest committer against the JVM.

- Parquet: `write_committed(..., committer="manifest")` and `df.write.format("committed")` (manifest)
  against Spark's `df.write.parquet` committed by Hadoop's JVM ManifestCommitter through
  spark-hadoop-cloud's PathOutputCommitProtocol and BindingParquetOutputCommitter
  (`jvm_committer_conf(..., "manifest")`): the baseline that counts, target ratio <= 1.25 for wall
  time; client CPU (`BenchEnv.client_cpu`: driver Python, Spark JVM, its Python workers) is compared
  too. Spark's classic commit (its own protocol, FileOutputCommitter v1) is an informative row.
- ORC: ours against `df.write.orc` with the same ManifestCommitter binding, and against
  FileOutputCommitter v1 (informative: pyarrow's ORC encoder against the JVM's).

Three informative rows show what bounds ours: the same DataFrame through `mapInArrow` with a task
that only counts the rows (the cost of moving them from the JVM to Python, which Spark's native
writer never pays), a raw uncommitted `mapInArrow` + pyarrow write of one file per task with our
tasks' writer (ours minus the commit protocol), and `df.write.format("committed")` with Spark's
per-row Arrow batch-size check off in the session (`common.ARROW_BYTE_CHECK_OFF`, what
`register_data_source(spark, unmeasured_arrow_batches=True)` sets), which `write_committed` skips
for its own job when the schema bounds a batch and the data source's rule skips for its writes
(`spark.source_batches`): the row with it and the default row should now be alike.

Codecs are explicit on both sides: parquet snappy, ORC zstd (Spark 4's defaults).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import uuid
from typing import Any

from airflow_commit_provider.core.layout import SUCCESS_FILENAME
from airflow_commit_provider.spark import register_data_source
from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf
from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from bench import spark_tasks
from bench.common import ARROW_BYTE_CHECK_OFF, BenchEnv, ScenarioResult, log, rotated, timer
from bench.jvm_peers import file_v1_conf

TARGET_RATIO = 1.25
HADOOP_MANIFEST = "df.write.{fmt} (Hadoop ManifestCommitter, PathOutputCommitProtocol)"
SPARK_FOC_V1 = "df.write.{fmt} (Spark's protocol, FileOutputCommitter v1)"
CODECS = {"parquet": "snappy", "orc": "zstd"}


def run(env: BenchEnv) -> ScenarioResult:
    target_bytes = env.pick(tiny=1024**2, small=256 * 1024**2, full=1024**3)
    partitions = env.pick(tiny=2, small=4, full=8)
    result = ScenarioResult(
        "local",
        "Local filesystem: manifest committer against the JVM (file://)",
        env.size,
        env.repeat,
        parameters={
            "target_bytes": target_bytes,
            "spark_partitions": partitions,
            "codecs": CODECS,
            "ours": "write_committed(df, file://..., committer='manifest'); df.write.format('committed')",
            "baseline": HADOOP_MANIFEST.format(fmt="parquet|orc"),
            "threads": env.threads,
        },
    )
    spark = env.spark
    register_data_source(spark)
    df = spark_tasks.make_frame(spark, target_bytes, partitions)
    root = env.work_dir / "local-writes"
    root.mkdir(exist_ok=True)
    variants = [
        "ours-parquet",
        "committed-parquet",
        "committed-nocheck-parquet",
        "jvm-manifest-parquet",
        "spark-parquet",
        "raw-parquet",
        "transfer-parquet",
        "ours-orc",
        "jvm-manifest-orc",
        "spark-orc",
    ]

    def write(name: str, frame: Any) -> tuple[float, float, Any, int, Any]:
        """One write: seconds, client CPU seconds, our summary (or None), bytes written, JVM
        manifest files committed."""
        path = root / f"{name}-{uuid.uuid4().hex[:8]}"
        url = f"file://{path}"
        fmt = name.rsplit("-", 1)[1]
        summary = committed = None
        # The raw and transfer rows move rows as write_committed's own jobs do (unmeasured batches).
        unmeasured = "-nocheck-" in name or name.startswith(("raw", "transfer"))
        arrow = ARROW_BYTE_CHECK_OFF if unmeasured else {}
        with applied_conf(spark, arrow), timer() as elapsed, timer(env.client_cpu) as cpu:
            if name.startswith("ours"):
                summary = write_committed(
                    frame,
                    url,
                    format=fmt,
                    committer="manifest",
                    options={"compression": CODECS[fmt], "threads": env.threads},
                )
            elif name.startswith("committed"):
                (
                    frame.write.format("committed")
                    .mode("append")
                    .options(
                        format=fmt, committer="manifest", compression=CODECS[fmt], threads=str(env.threads)
                    )
                    .save(url)
                )
            elif name.startswith("raw"):
                path.mkdir()
                task = functools.partial(
                    spark_tasks.raw_local_parquet_task, str(path), CODECS[fmt], spark_tasks.ROW_GROUP_BYTES
                )
                frame.mapInArrow(task, spark_tasks.RAW_RESULT_SCHEMA).collect()
            elif name.startswith("transfer"):
                frame.mapInArrow(spark_tasks.transfer_only_task, spark_tasks.RAW_RESULT_SCHEMA).collect()
            elif name.startswith("jvm-manifest"):
                with applied_conf(spark, jvm_committer_conf(url, "manifest")):
                    frame.write.option("compression", CODECS[fmt]).format(fmt).save(url)
            else:
                with applied_conf(spark, file_v1_conf("file")):
                    frame.write.option("compression", CODECS[fmt]).format(fmt).save(url)
        written = _bytes_under(path)
        if name.startswith("jvm-manifest"):
            committed = _jvm_manifest_files_committed(path)
        shutil.rmtree(path, ignore_errors=True)
        return elapsed(), cpu(), summary, written, committed

    if env.size != "tiny":  # the smoke test only checks that the scenario runs
        # Warm-up (not measured): Python workers, imports, JIT of both writers.
        small = spark_tasks.make_frame(spark, 256 * 1024, partitions)
        for name in variants:
            write(name, small)

    for rep in range(env.repeat):
        order = rotated(variants, rep)
        seconds: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for name in order:
            seconds[name], cpu[name], summary, written, committed = write(name, df)
            result.measure(f"total seconds, {name}", seconds[name])
            result.measure(f"client CPU seconds, {name}", cpu[name])
            result.measure(f"bytes written, {name}", written, "bytes")
            if summary is not None:
                result.measure(f"job commit seconds, {name}", summary.job_commit_seconds)
            if committed is not None:
                result.measure(
                    f"files the JVM manifest committer committed (renamed), {name}", committed, "files"
                )
            log(f"local: {name}: {written / 1e6:.0f} MB in {seconds[name]:.1f} s")
        parquet_manifest = HADOOP_MANIFEST.format(fmt="parquet")
        for ours, label in (
            ("ours-parquet", "write_committed(manifest)"),
            ("committed-parquet", "df.write.format('committed') (manifest)"),
            ("committed-nocheck-parquet", "df.write.format('committed') (manifest), Arrow byte check off"),
        ):
            result.comparison(
                f"parquet: {label} vs Hadoop ManifestCommitter",
                ours_label=label,
                baseline_label=parquet_manifest,
                unit="s",
                target=None if "-nocheck-" in ours else TARGET_RATIO,
                group="local",
            ).add(seconds[ours], seconds["jvm-manifest-parquet"])
            result.comparison(
                f"parquet: {label} vs Hadoop ManifestCommitter, client CPU",
                ours_label=label,
                baseline_label=parquet_manifest,
                unit="s",
                group="local_cpu",
            ).add(cpu[ours], cpu["jvm-manifest-parquet"])
        result.comparison(
            "parquet: manifest vs Spark FileOutputCommitter v1",
            ours_label="write_committed(manifest)",
            baseline_label=SPARK_FOC_V1.format(fmt="parquet"),
            unit="s",
            group="local",
        ).add(seconds["ours-parquet"], seconds["spark-parquet"])
        result.comparison(
            "parquet: manifest vs raw mapInArrow + pyarrow write (no commit protocol)",
            ours_label="write_committed(manifest)",
            baseline_label="mapInArrow + pyarrow, one uncommitted file per task",
            unit="s",
            group="local",
        ).add(seconds["ours-parquet"], seconds["raw-parquet"])
        result.comparison(
            "parquet: moving the rows to Python alone vs Hadoop ManifestCommitter",
            ours_label="mapInArrow that only counts the rows",
            baseline_label=parquet_manifest,
            unit="s",
            group="local",
        ).add(seconds["transfer-parquet"], seconds["jvm-manifest-parquet"])
        result.comparison(
            "orc: manifest vs Hadoop ManifestCommitter",
            ours_label="write_committed(manifest)",
            baseline_label=HADOOP_MANIFEST.format(fmt="orc"),
            unit="s",
            group="local",
        ).add(seconds["ours-orc"], seconds["jvm-manifest-orc"])
        result.comparison(
            "orc: manifest vs Spark FileOutputCommitter v1",
            ours_label="write_committed(manifest)",
            baseline_label=SPARK_FOC_V1.format(fmt="orc"),
            unit="s",
            group="local",
        ).add(seconds["ours-orc"], seconds["spark-orc"])
    return result


def _bytes_under(path: os.PathLike[str] | str) -> int:
    total = 0
    for current, _dirs, files in os.walk(path):
        for name in files:
            if not name.startswith(("_", ".")):
                total += os.path.getsize(os.path.join(current, name))
    return total


def _jvm_manifest_files_committed(path: os.PathLike[str] | str) -> Any:
    try:
        with open(os.path.join(path, SUCCESS_FILENAME)) as handle:
            success = json.load(handle)
    except (OSError, ValueError):
        return -1
    return success.get("iostatistics", {}).get("counters", {}).get("committer_files_committed", -1)
