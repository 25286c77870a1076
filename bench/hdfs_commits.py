"""Scenario: ours against Hadoop's own committers on HDFS, end to end, on the same data in one run.

One Hadoop cluster (`BenchEnv.hadoop`: MiniDFSCluster, one NameNode and one DataNode on loopback,
used by nothing else while the scenario runs), one Spark session (``local[2]``), the same
DataFrames (`datasets`: tables partitioned by a ``dt`` column, a few hundred to a few thousand
small files, and a few big ones), each written to a fresh ``hdfs://`` destination by:

- ours: ``write_committed(committer="manifest")`` and ``write_committed(committer="file-v1")``,
  through our WebHDFS store (`HdfsStore`) in the tasks and the driver;
- Hadoop's: ``df.write.parquet`` committed by Hadoop's ManifestCommitter (spark-hadoop-cloud's
  PathOutputCommitProtocol and BindingParquetOutputCommitter: `jvm_committer_conf`), and by
  Spark's classic commit with FileOutputCommitter v1 (`file_v1_conf`), through Hadoop's HDFS client.

The variants alternate in order across repetitions; ratios are ours / Hadoop's committer of the
same kind in the same repetition (manifest / ManifestCommitter, file-v1 / FileOutputCommitter v1).

Per write: wall time; job commit time (ours: `WriteSummary.job_commit_seconds`, from the tasks'
end to the commit's; Hadoop's: Spark's own ``job commit time`` metric, the protocol's `commitJob`
around Hadoop's committer, since FileOutputCommitter's `_SUCCESS` is empty and the
ManifestCommitter's is written before its own commitJob timer stops); NameNode calls per data file written, counted by the NameNode (`bench.namenode`): every
call it served (Hadoop's client RPCs; our WebHDFS requests and the DataNode's RPCs on our behalf),
by method, and its namesystem operations by kind (creates, renames, listings, deletes, file infos,
block lookups and added blocks, counted alike on both routes).

`datasets` and `hdfs_workspace` are for the other HDFS scenarios too (`bench.hdfs_replace`): the
same data, and a folder on the cluster that the session's Python workers reach.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import ENV_WEBHDFS_URL, HdfsSettings
from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf
from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from bench.common import BenchEnv, ScenarioResult, log, new_id, rotated, timer
from bench.jvm_peers import file_v1_conf, spark_job_commit_seconds, sql_execution_mark
from bench.namenode import NameNodeCalls, NameNodeCounter

CODEC = "snappy"
PARTITION_COLUMN = "dt"
FIRST_DAY = "2024-01-01"


@dataclass(frozen=True)
class Dataset:
    """A table of `tasks` Spark partitions, each holding every one of `days` ``dt`` values: a
    partitioned write makes one file per task and day."""

    tasks: int
    days: int
    rows: int

    @property
    def files(self) -> int:
        return self.tasks * self.days

    @property
    def label(self) -> str:
        return f"{self.files:,} files"

    def frame(self, spark: Any, seed: int = 7) -> Any:
        """An id, four random doubles (incompressible) and ``dt``, the day ``id % days`` after
        `FIRST_DAY`: every task's rows cover every day."""
        from pyspark.sql import functions as F

        day = F.date_add(F.lit(FIRST_DAY).cast("date"), (F.col("id") % self.days).cast("int"))
        return spark.range(0, self.rows, numPartitions=self.tasks).select(
            F.col("id"),
            *(F.rand(seed + i).alias(f"d{i}") for i in range(4)),
            F.date_format(day, "yyyy-MM-dd").alias(PARTITION_COLUMN),
        )


def datasets(env: BenchEnv) -> list[Dataset]:
    """The scenario's tables by size: many small files (a daily table's backfill), and a few big
    ones (about 40 bytes a row on disk: 32 MB files at `small`, 64 MB at `full`)."""
    return env.pick(
        tiny=[Dataset(tasks=2, days=3, rows=600)],
        small=[
            Dataset(tasks=4, days=50, rows=200_000),
            Dataset(tasks=8, days=125, rows=1_000_000),
            Dataset(tasks=2, days=2, rows=3_200_000),
        ],
        full=[
            Dataset(tasks=8, days=50, rows=400_000),
            Dataset(tasks=16, days=250, rows=4_000_000),
            Dataset(tasks=4, days=2, rows=12_800_000),
        ],
    )


@contextlib.contextmanager
def hdfs_workspace(env: BenchEnv, prefix: str) -> Iterator[StorePath]:
    """A fresh folder on the cluster (removed after) that this process and the session's Python
    workers reach through WebHDFS: `write_committed`'s tasks open the store from their environment
    (``AIRFLOW_COMMIT_WEBHDFS_URL``), which is set for the block in both."""
    cluster, spark = env.hadoop, env.spark
    root = StorePath.parse(f"{cluster.fs_default_name}/{new_id(prefix)}")
    store = HdfsStore(HdfsSettings(webhdfs_url=cluster.webhdfs_url))
    # sparkContext.environment: the variables every Python function of the session carries to its workers.
    with (
        _variable(os.environ, cluster.webhdfs_url),
        _variable(spark.sparkContext.environment, cluster.webhdfs_url),
    ):
        try:
            yield root
        finally:
            store.delete_tree(root)
            store.close()


@contextlib.contextmanager
def _variable(variables: MutableMapping[str, str], webhdfs_url: str) -> Iterator[None]:
    """``AIRFLOW_COMMIT_WEBHDFS_URL`` set in `variables` for the block, then as it was."""
    saved = variables.get(ENV_WEBHDFS_URL)
    variables[ENV_WEBHDFS_URL] = webhdfs_url
    try:
        yield
    finally:
        if saved is None:
            variables.pop(ENV_WEBHDFS_URL, None)
        else:
            variables[ENV_WEBHDFS_URL] = saved


@dataclass(frozen=True)
class Variant:
    """One way to write: ours (`write_committed`) or Hadoop's (``df.write.parquet``), per committer."""

    ours: bool
    committer: str
    """``manifest`` or ``file-v1``."""

    @property
    def name(self) -> str:
        if self.ours:
            return f"write_committed({self.committer})"
        return {"manifest": "Hadoop ManifestCommitter", "file-v1": "FileOutputCommitter v1"}[self.committer]

    @property
    def peer(self) -> Variant:
        return Variant(not self.ours, self.committer)


VARIANTS = [Variant(ours, committer) for committer in ("manifest", "file-v1") for ours in (True, False)]


@dataclass
class Written:
    seconds: float
    job_commit_seconds: float
    files: int
    bytes: int
    calls: NameNodeCalls


def run(env: BenchEnv) -> ScenarioResult:
    tables = datasets(env)
    result = ScenarioResult(
        "hdfs",
        "Ours against Hadoop's committers on HDFS (same DataFrames, cluster and session)",
        env.size,
        env.repeat,
        parameters={
            "tables": [f"{t.label} ({t.tasks} tasks x {t.days} days, {t.rows:,} rows)" for t in tables],
            "format": f"parquet ({CODEC}), partitioned by {PARTITION_COLUMN}",
            "ours": [v.name for v in VARIANTS if v.ours],
            "baselines": [f"df.write.parquet ({v.name})" for v in VARIANTS if not v.ours],
            "threads": env.threads,
            "cluster": "MiniDFSCluster: 1 NameNode, 1 DataNode, on loopback",
        },
    )
    result.notes += [
        "Job commit: ours from write_committed's summary (tasks done to commit done); Hadoop's from "
        "Spark's `job commit time` metric (the protocol's commitJob, Hadoop's committer within it), "
        "which Spark rounds to 0.1 s from 1 s on.",
        "NameNode calls: every call the NameNode's RPC server handled for the write, by method "
        "(RpcDetailedActivity; the DataNode's heartbeats and block reports left out). Hadoop's client "
        "calls by RPC; each of our store's WebHDFS requests is run there as an external call, "
        "`(external)`, and the DataNode's own client adds the RPCs of each file written or read "
        "through it (create, addBlock, complete; getBlockLocations) on our behalf.",
        "NameNode operations (NameNodeActivity): the namesystem's own counts, alike on both routes: "
        "creates, renames, listings, deletes, file infos, block lookups and added blocks (mkdirs and "
        "complete have no counter).",
    ]
    spark, counter = env.spark, NameNodeCounter(env.hadoop)
    with hdfs_workspace(env, "bench-hdfs") as root:
        if env.size != "tiny":  # the smoke test only checks that the scenario runs
            warm = Dataset(tasks=2, days=2, rows=2_000).frame(spark)  # workers, imports, JIT, connections
            for variant in VARIANTS:
                write_variant(env, variant, warm, root, counter)
        for table in tables:
            frame = table.frame(spark)
            for rep in range(env.repeat):
                written = {
                    variant: write_variant(env, variant, frame, root, counter)
                    for variant in rotated(VARIANTS, rep)
                }
                for variant in VARIANTS:
                    if written[variant].files != table.files:
                        raise RuntimeError(
                            f"hdfs: {variant.name} wrote {written[variant].files} files of {table.label}"
                        )
                    _record(result, table, variant, written[variant])
                _compare(result, table, written)
    return result


def write_variant(
    env: BenchEnv, variant: Variant, frame: Any, root: StorePath, counter: NameNodeCounter
) -> Written:
    """One write of `frame` by `variant` to a fresh destination under `root`, measured, then removed."""
    spark = env.spark
    destination = root.join(
        new_id(variant.committer.replace("-", "") + ("-ours" if variant.ours else "-hadoop"))
    )
    url = destination.uri()
    mark = sql_execution_mark(spark)
    before = counter.read()
    with timer() as elapsed:
        if variant.ours:
            summary = write_committed(
                frame,
                url,
                format="parquet",
                partition_by=PARTITION_COLUMN,
                committer=variant.committer,
                options={"compression": CODEC, "threads": env.threads},
            )
        else:
            conf = (
                jvm_committer_conf(url, "manifest")
                if variant.committer == "manifest"
                else file_v1_conf("hdfs")
            )
            with applied_conf(spark, conf):
                frame.write.partitionBy(PARTITION_COLUMN).option("compression", CODEC).parquet(url)
    seconds = elapsed()
    calls = counter.since(before)
    store = HdfsStore(HdfsSettings(webhdfs_url=env.hadoop.webhdfs_url))
    try:
        files = size = 0
        for status in store.list_files(destination):
            if not any(
                part.startswith(("_", ".")) for part in status.path.relative_to(destination).split("/")
            ):
                files += 1
                size += status.size
        written = Written(seconds, 0.0, files, size, calls)
        if variant.ours:
            written.job_commit_seconds = summary.job_commit_seconds
        else:
            written.job_commit_seconds = spark_job_commit_seconds(spark, mark)
        store.delete_tree(destination)
    finally:
        store.close()
    log(
        f"hdfs: {variant.name}: {files} files, {size / 1e6:.0f} MB in {seconds:.2f} s "
        f"(job commit {written.job_commit_seconds:.2f} s); NameNode calls: {calls.total} "
        f"(WebHDFS {calls.webhdfs}, RPCs {calls.rpcs}), operations {calls.operations}"
    )
    return written


def _record(result: ScenarioResult, table: Dataset, variant: Variant, written: Written) -> None:
    name = f"{table.label}, {variant.name}"
    per_file = max(written.files, 1)
    result.measure(f"total seconds, {name}", written.seconds)
    result.measure(f"job commit seconds, {name}", written.job_commit_seconds)
    result.measure(f"files, {name}", written.files, "files")
    result.measure(f"bytes written, {name}", written.bytes, "bytes")
    for kind, count in written.calls.operations.items():
        result.measure(f"NameNode {kind} per file, {name}", count / per_file, "operations/file")
    if written.calls.webhdfs:
        result.measure(
            f"NameNode WebHDFS requests per file, {name}", written.calls.webhdfs / per_file, "calls/file"
        )
    for method, count in written.calls.rpcs.items():
        result.measure(f"NameNode RPC {method} per file, {name}", count / per_file, "calls/file")
    result.check(
        f"NameNode calls per file, {name}",
        unit="calls/file",
        note="every call the NameNode's RPC server handled (WebHDFS requests as external calls), "
        "the DataNodes' protocol left out",
    ).values.append(written.calls.total / per_file)
    result.check(
        f"NameNode operations per file, {name}",
        unit="operations/file",
        note="NameNodeActivity: creates, renames, listings, deletes, file infos, block lookups, blocks added",
    ).values.append(written.calls.operations_total / per_file)


def _compare(result: ScenarioResult, table: Dataset, written: dict[Variant, Written]) -> None:
    """Each of ours against Hadoop's committer of the same kind, in the same repetition."""
    measures: tuple[tuple[str, str, Callable[[Written], float]], ...] = (
        ("", "s", lambda w: w.seconds),
        (", job commit", "s", lambda w: w.job_commit_seconds),
        (", NameNode calls per file", "calls/file", lambda w: w.calls.total / max(w.files, 1)),
        (
            ", NameNode operations per file",
            "operations/file",
            lambda w: w.calls.operations_total / max(w.files, 1),
        ),
    )
    for variant in (v for v in VARIANTS if v.ours):
        peer = variant.peer
        for suffix, unit, measure in measures:
            result.comparison(
                f"{table.label}: {variant.committer} vs {peer.name}{suffix}",
                ours_label=variant.name,
                baseline_label=f"df.write.parquet ({peer.name})",
                unit=unit,
                group="hdfs",
            ).add(measure(written[variant]), measure(written[peer]))
