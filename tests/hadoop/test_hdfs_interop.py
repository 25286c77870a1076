"""Hadoop's `_SUCCESS` interop on HDFS, both ways, with the suite's one Spark session pointed at the
test cluster by full ``hdfs://`` URIs (no conf change: its Hadoop client opens any NameNode).

- Hadoop's ManifestCommitter and FileOutputCommitter (v1) write a table through Spark; our
  `_SUCCESS` check, through the WebHDFS store, reads what they wrote.
- Our manifest and file-v1 committers commit a job through `core` onto HDFS; Hadoop's
  ManifestSuccessData loader reads our `_SUCCESS` through Hadoop's own HDFS client, and Spark reads
  exactly the committed rows.

Cost: four Spark jobs of a few rows on the session's Spark and cluster (about 2-7 s each here).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.workload import make_options

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.committers.registry import committer_named_in_success
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf
from airflow_commit_provider.success.check import LEGACY_STATE, load_success

pytestmark = [pytest.mark.spark, pytest.mark.hadoop_peers, pytest.mark.hadoop_cluster]


@pytest.fixture
def hdfs_table(hadoop_cluster: Any) -> Iterator[tuple[HdfsStore, StorePath]]:
    """A store on the minicluster and a fresh table folder on it, removed afterwards."""
    store = HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url))
    root = StorePath.parse(f"{hadoop_cluster.fs_default_name}/interop-{uuid.uuid4().hex[:12]}")
    yield store, root.join("table")
    store.delete_tree(root)
    store.close()


def part_files(store: HdfsStore, table: StorePath) -> list[StorePath]:
    return sorted(s.path for s in store.list_files(table) if s.path.name.startswith("part-"))


@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_our_check_reads_the_success_hadoops_committers_write_on_hdfs(
    spark: Any, hdfs_table: tuple[HdfsStore, StorePath], committer: str
) -> None:
    store, table = hdfs_table
    frame = spark.range(12, numPartitions=2).selectExpr("id", "id % 3 AS p")
    with applied_conf(spark, jvm_committer_conf(str(table), committer)):
        frame.write.partitionBy("p").parquet(str(table))
    files = part_files(store, table)
    assert {path.parent.name for path in files} == {"p=0", "p=1", "p=2"}
    success = load_success(store, table, allow_legacy=True)
    if committer == "file-v1":  # FileOutputCommitter's marker: 0 bytes, read as such
        assert success.state == LEGACY_STATE and store.read_bytes(table.join("_SUCCESS")) == b""
        return
    assert committer_named_in_success(success.committer) == "manifest" and success.success
    assert sorted(StorePath.from_uri(name) for name in success.filenames) == files


@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_hadoop_reads_the_success_our_committers_write_on_hdfs(
    spark: Any, hdfs_table: tuple[HdfsStore, StorePath], committer: str, tmp_path: Any
) -> None:
    store, table = hdfs_table
    job_id = uuid.uuid4().hex
    job = create_committer(committer, store, table, job_id, make_options(tmp_path / "staging"))
    job.setup_job()
    results = []
    for task in range(3):
        attempt = job.task_attempt(task, 0)
        attempt.setup_task()
        with attempt.create_file(f"p={task % 2}/part-{task:05d}.parquet") as stream:
            stream.write(parquet_rows([task * 10, task * 10 + 1]))
        results.append(attempt.commit_task())
    job.commit_job(results)

    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(table.join("_SUCCESS").uri()))
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    assert fs.getScheme() == "hdfs"
    loaded = jvm.org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.ManifestSuccessData.load(
        fs, path
    )
    assert (loaded.getJobId(), loaded.getCommitter(), loaded.getSuccess()) == (job_id, committer, True)
    listed = list(loaded.getFilenamePaths())
    assert len(listed) == 3 and all(fs.exists(p) for p in listed)
    assert sorted(str(p.toUri()) for p in listed) == sorted(p.uri() for p in part_files(store, table))
    rows = spark.read.parquet(str(table)).collect()
    assert sorted((row.id, row.p) for row in rows) == sorted(
        (task * 10 + i, task % 2) for task in range(3) for i in range(2)
    )


def parquet_rows(ids: list[int]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)
    return out.getvalue()
