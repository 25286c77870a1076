"""Scenario 3: the local filesystem (file://), one DataFrame, our manifest committer against the JVM.

- Parquet: `write_committed(..., committer="manifest")` against Spark's own `df.write.parquet`, which
  commits with the JVM FileOutputCommitter (algorithm 1, set explicitly). Target: ratio <= 1.25.
- ORC: ours against Spark's `df.write.orc` with Hadoop's JVM manifest committer
  (`jvm_committer_conf(..., "manifest", bind_commit_protocol=False)`), and against FileOutputCommitter
  v1 for ORC. PyPI's PySpark lacks spark-hadoop-cloud's PathOutputCommitProtocol, and Spark's default
  protocol only routes task files through a committer's work path when the committer IS a
  FileOutputCommitter: so the JVM manifest committer runs its job setup, task commits and job commit
  (and writes its JSON `_SUCCESS`) but tasks write straight into the destination and it commits 0
  files. That row therefore times the manifest committer's overhead without its renames, a lower
  bound for it (and output that is visible before job commit).

Two informative rows show what bounds ours: the same DataFrame through `mapInArrow` with a task
that only counts the rows (the cost of moving them from the JVM to Python, which Spark's native
writer never pays), and a raw uncommitted `mapInArrow` + pyarrow write of one file per task with our
tasks' writer (ours minus the commit protocol).

Codecs are explicit on both sides: parquet snappy, ORC zstd (Spark 4's defaults).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import uuid
from typing import Any

from airflow_commit_provider.core.formats.success import SUCCESS_FILENAME
from airflow_commit_provider.spark.jvm_committers import applied_conf, jvm_committer_conf
from airflow_commit_provider.spark.writer import write_committed
from bench import spark_tasks
from bench.common import BenchEnv, ScenarioResult, log, timer

TARGET_RATIO = 1.25
FOC_V1 = {
    "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "1",
    "spark.hadoop.mapreduce.outputcommitter.factory.scheme.file": (
        "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"
    ),
}
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
            "ours": "write_committed(df, file://..., committer='manifest')",
            "threads": env.threads,
        },
    )
    result.notes.append(
        "The ORC row against Hadoop's JVM manifest committer is a lower bound for the JVM side: without "
        "spark-hadoop-cloud (not in PyPI's PySpark) Spark writes task files straight into the destination "
        "and the JVM manifest committer commits 0 files (see the measured `committer_files_committed`)."
    )
    spark = env.spark
    df = spark_tasks.make_frame(spark, target_bytes, partitions)
    root = env.work_dir / "local-writes"
    root.mkdir(exist_ok=True)
    variants = [
        "ours-parquet",
        "spark-parquet",
        "raw-parquet",
        "transfer-parquet",
        "ours-orc",
        "jvm-manifest-orc",
        "spark-orc",
    ]

    def write(name: str, frame: Any) -> tuple[float, Any, int, Any]:
        """One write: seconds, our summary (or None), bytes written, JVM manifest files committed."""
        path = root / f"{name}-{uuid.uuid4().hex[:8]}"
        url = f"file://{path}"
        fmt = name.rsplit("-", 1)[1]
        summary = committed = None
        with timer() as elapsed:
            if name.startswith("ours"):
                summary = write_committed(
                    frame,
                    url,
                    format=fmt,
                    committer="manifest",
                    options={"compression": CODECS[fmt], "threads": env.threads},
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
                conf = jvm_committer_conf(url, "manifest", bind_commit_protocol=False)
                # The manifest committer takes the job's UUID from the write's conf (jobIdSource).
                conf["spark.sql.sources.writeJobUUID"] = str(uuid.uuid4())
                with applied_conf(spark, conf):
                    frame.write.option("compression", CODECS[fmt]).format(fmt).save(url)
            else:
                with applied_conf(spark, FOC_V1):
                    frame.write.option("compression", CODECS[fmt]).format(fmt).save(url)
        written = _bytes_under(path)
        if name.startswith("jvm-manifest"):
            committed = _jvm_manifest_files_committed(path)
        shutil.rmtree(path, ignore_errors=True)
        return elapsed(), summary, written, committed

    if env.size != "tiny":  # the smoke test only checks that the scenario runs
        # Warm-up (not measured): Python workers, imports, JIT of both writers.
        small = spark_tasks.make_frame(spark, 256 * 1024, partitions)
        for name in variants:
            write(name, small)

    for rep in range(env.repeat):
        order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
        seconds: dict[str, float] = {}
        for name in order:
            seconds[name], summary, written, committed = write(name, df)
            result.measure(f"total seconds, {name}", seconds[name])
            result.measure(f"bytes written, {name}", written, "bytes")
            if summary is not None:
                result.measure(f"job commit seconds, {name}", summary.job_commit_seconds)
            if committed is not None:
                result.measure("files the JVM manifest committer committed (renamed)", committed, "files")
            log(f"local: {name}: {written / 1e6:.0f} MB in {seconds[name]:.1f} s")
        result.comparison(
            "parquet: manifest vs Spark FileOutputCommitter v1",
            ours_label="write_committed(manifest)",
            baseline_label="df.write.parquet (JVM FileOutputCommitter v1)",
            unit="s",
            target=TARGET_RATIO,
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
            "parquet: moving the rows to Python alone vs Spark FileOutputCommitter v1",
            ours_label="mapInArrow that only counts the rows",
            baseline_label="df.write.parquet (JVM FileOutputCommitter v1)",
            unit="s",
            group="local",
        ).add(seconds["transfer-parquet"], seconds["spark-parquet"])
        result.comparison(
            "orc: manifest vs Hadoop JVM manifest committer",
            ours_label="write_committed(manifest)",
            baseline_label="df.write.orc (Hadoop ManifestCommitter, unbound)",
            unit="s",
            group="local",
        ).add(seconds["ours-orc"], seconds["jvm-manifest-orc"])
        result.comparison(
            "orc: manifest vs Spark FileOutputCommitter v1",
            ours_label="write_committed(manifest)",
            baseline_label="df.write.orc (JVM FileOutputCommitter v1)",
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
