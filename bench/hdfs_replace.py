"""Scenario: ``replace`` on HDFS, ours against Spark's own dynamic partition overwrite, in one run.

One table on the run's Hadoop cluster (`BenchEnv.hadoop`, MiniDFSCluster with one DataNode, in a
fresh folder: `bench.hdfs_commits.hdfs_workspace`), one Spark session (`BenchEnv.spark`,
local mode; its Hadoop client reaches the NameNode by full ``hdfs://`` URIs, its Python tasks reach
WebHDFS by the executor environment). Each repetition gives both writers a table of `days` days
written by Spark (not timed), then replaces half of them and adds as many new days with one
DataFrame:

- ours: ``write_committed(df, "hdfs://...", partition_by=["dt"], conflict_mode="replace")``, the
  manifest committer (the default there): its job commit renames each file into the job's incoming
  tree, then swaps each written partition folder with two renames (`core.stages.swaps`);
- Spark's: ``df.write.mode("overwrite").partitionBy("dt").parquet(...)`` with
  ``spark.sql.sources.partitionOverwriteMode=dynamic`` (its own commit protocol and
  FileOutputCommitter v1, `jvm_committer_conf(..., "file-v1", dynamic_partition_overwrite=True)`):
  files staged under ``.spark-staging-<job>``, each partition deleted and its staged folder renamed
  in at job commit, through Hadoop's RPC client.

Per write: wall time (ratio ours / Spark's, target 1.25 as for the local manifest scenario), and
the NameNode calls per file written, counted by the NameNode (`bench.namenode`, both routes); ours
also its job commit's seconds and store calls per file (its `_SUCCESS` counters; a write of a
file is one call there, four WebHDFS requests). The two writers
alternate which goes first. Both tables are checked to hold the same folders and rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf
from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from airflow_commit_provider.success.check import load_success
from bench.common import BenchEnv, ScenarioResult, log, requests_in, rotated, timer
from bench.hdfs_commits import hdfs_workspace
from bench.namenode import NameNodeCounter

if TYPE_CHECKING:
    pass

TARGET_RATIO = 1.25
#: The HDFS store's counters of one call each that `common.REQUEST_COUNTERS` (S3's) lacks.
HDFS_CALLS = ("op_rename", "op_mkdirs")
CODEC = "snappy"
SPARKS = "df.write.mode('overwrite').partitionBy('dt') (Spark's dynamic overwrite, FileOutputCommitter v1)"
OURS = "write_committed(..., conflict_mode='replace') (manifest, partitions swapped)"


def run(env: BenchEnv) -> ScenarioResult:
    rows_per_day = env.pick(tiny=2_000, small=200_000, full=1_000_000)
    days = env.pick(tiny=4, small=8, full=16)
    tasks = env.pick(tiny=2, small=4, full=8)
    result = ScenarioResult(
        "hdfs_replace",
        "HDFS: replace (partitions swapped) against Spark's dynamic partition overwrite",
        env.size,
        env.repeat,
        parameters={
            "rows_per_day": rows_per_day,
            "days_in_table": days,
            "days_replaced": days // 2,
            "days_added": days // 2,
            "spark_partitions": tasks,
            "codec": CODEC,
            "ours": OURS,
            "baseline": SPARKS,
            "threads": env.threads,
        },
    )
    store = HdfsStore(HdfsSettings(webhdfs_url=env.hadoop.webhdfs_url))
    try:
        _measure(env, result, store, rows_per_day, days, tasks)
    finally:
        store.close()
    result.notes.append(
        "On HDFS a swap is two NameNode renames (the old partition put aside, the incoming one renamed "
        "in); Spark's protocol deletes each partition, then renames its staged one in. Ours reaches the "
        "NameNode over WebHDFS (HTTP), Spark through Hadoop's RPC client."
    )
    return result


def _measure(
    env: BenchEnv, result: ScenarioResult, store: HdfsStore, rows_per_day: int, days: int, tasks: int
) -> None:
    spark, counter = env.spark, NameNodeCounter(env.hadoop)
    initial = _days(spark, range(days), rows_per_day, tasks, "old")
    replacing = _days(spark, range(days // 2, days + days // 2), rows_per_day, tasks, "new")
    files_written = tasks * days  # every task writes every day it holds
    wall = result.comparison(
        "replace wall time", ours_label=OURS, baseline_label=SPARKS, unit="s", target=TARGET_RATIO
    )
    namenode_calls = {
        writer: result.check(f"NameNode calls per file written: {label}", unit="calls")
        for writer, label in (("ours", OURS), ("spark", SPARKS))
    }
    namenode = env.hadoop.fs_default_name
    dynamic = jvm_committer_conf(f"{namenode}/t", "file-v1", dynamic_partition_overwrite=True)
    plain = jvm_committer_conf(f"{namenode}/t", "file-v1")
    for turn in range(env.repeat):
        seconds: dict[str, float] = {}
        tables: dict[str, str] = {}
        with hdfs_workspace(env, "bench-replace") as run_root:
            for writer in rotated(["ours", "spark"], turn):
                table = tables[writer] = str(run_root.join(writer))
                with applied_conf(spark, plain):
                    initial.write.option("compression", CODEC).partitionBy("dt").parquet(table)
                before = counter.read()
                with timer() as elapsed:
                    if writer == "ours":
                        summary = write_committed(
                            replacing,
                            table,
                            partition_by=["dt"],
                            conflict_mode="replace",
                            options={"compression": CODEC, "threads": env.threads},
                        )
                    else:
                        with applied_conf(spark, dynamic):
                            replacing.write.option("compression", CODEC).mode("overwrite").partitionBy(
                                "dt"
                            ).parquet(table)
                seconds[writer] = elapsed()
                namenode_calls[writer].values.append(counter.since(before).total / files_written)
            wall.add(seconds["ours"], seconds["spark"])
            result.measure("ours: job commit", summary.job_commit_seconds)
            counters = load_success(store, StorePath.parse(tables["ours"])).iostatistics.counters
            calls = requests_in(counters) + sum(counters.get(name, 0) for name in HDFS_CALLS)
            result.check("ours: store calls per file written (WebHDFS)", unit="calls").values.append(
                calls / max(summary.files, 1)
            )
            result.measure(
                "ours: partitions swapped", counters.get("committer_partitions_swapped", 0), unit="partitions"
            )
            _same_table(spark, tables["ours"], tables["spark"])
        log(f"turn {turn}: ours {seconds['ours']:.2f} s, Spark's {seconds['spark']:.2f} s")


def _days(spark: Any, days: range, rows_per_day: int, tasks: int, tag: str) -> Any:
    """`rows_per_day` rows for each day of `days` (``dt=d<day>``), in `tasks` tasks."""
    from pyspark.sql import functions as F

    rows = rows_per_day * len(days)
    return spark.range(0, rows, numPartitions=tasks).select(
        F.col("id"),
        F.rand(7).alias("value"),
        F.lit(tag).alias("tag"),
        F.concat(F.lit("d"), F.lpad((F.col("id") % len(days) + days.start).cast("string"), 3, "0")).alias(
            "dt"
        ),
    )


def _same_table(spark: Any, ours: str, sparks: str) -> None:
    """Both tables hold the same rows per day and tag (a benchmark of a wrong replace is no benchmark)."""

    def counts(table: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(row) for row in spark.read.parquet(table).groupBy("dt", "tag").count().collect())

    if counts(ours) != counts(sparks):
        raise AssertionError(f"{ours} and {sparks} differ after the replace")
