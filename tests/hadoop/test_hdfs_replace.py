"""``replace`` on HDFS (the test cluster, through WebHDFS) with the manifest and file-v1 committers:
the scenario of tests/support/replace_swap.py (as tests/core/test_replace_by_swap.py runs it on
local files), a reader between the two renames of a swap, a crash at each folder rename rolled
forward, and Spark's own dynamic partition overwrite on hdfs:// as the oracle.

Cost: on the session's cluster, about 1-3 s a job (some 60-90 WebHDFS requests), 8 jobs in all,
plus the oracle's Spark writes and reads (about 5-15 s).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.faults import FaultInjectingStore, SimulatedCrash
from support.hdfs import listed_counts, namespace_counts
from support.invariants import store_files
from support.replace_oracle import assert_replace_matches_sparks
from support.replace_swap import (
    EXPECTED,
    OLD,
    WATCHED,
    PartitionWatcher,
    assert_replaced,
    run_replace,
    visible,
    write_table,
)

from airflow_commit_provider.core import job_control
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

pytestmark = pytest.mark.hadoop_cluster


@pytest.fixture
def hdfs_root(hadoop_cluster: HadoopCluster) -> Iterator[tuple[HdfsStore, StorePath]]:
    """A store on the minicluster and a fresh folder on it, removed afterwards."""
    store = HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url))
    root = StorePath.parse(f"{hadoop_cluster.fs_default_name}/replace-{uuid.uuid4().hex[:12]}")
    yield store, root
    store.delete_tree(root)
    store.close()


@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_replace_swaps_exactly_the_written_partitions_on_hdfs(
    hdfs_root: tuple[HdfsStore, StorePath], hadoop_cluster: HadoopCluster, committer: str
) -> None:
    """Complete, exclusive, only dt=1 and dt=3 replaced, what another job keeps in dt=1 and a
    second job's leftovers kept; the NameNode holds nothing the listing does not show (no hidden
    folder of the swap, no empty folder)."""
    store, root = hdfs_root
    table = root.join("table")
    write_table(store, table)
    job_id = uuid.uuid4().hex
    run_replace(committer, store, table, job_id)
    assert_replaced(store, table, job_id)
    assert namespace_counts(hadoop_cluster, table) == listed_counts(store_files(store, table))


def test_a_reader_between_the_two_renames_finds_the_partition_absent(
    hdfs_root: tuple[HdfsStore, StorePath],
) -> None:
    """HDFS cannot exchange folders: a reader looking at dt=1 after every store call sees the old
    files, then no partition for exactly one call (the rename in), then the new files; never a mix."""
    store, root = hdfs_root
    table = root.join("table")
    write_table(store, table)
    watcher = PartitionWatcher(store, table.join(WATCHED))
    run_replace("manifest", watcher, table, uuid.uuid4().hex)
    assert [state for _call, _op, state in watcher.states] == [
        visible(OLD, WATCHED),
        None,
        visible(EXPECTED, WATCHED),
    ]
    (absent_at, op, _), (present_at, op_in, _) = watcher.states[1:]
    assert (op, op_in) == ("rename_directory", "rename_directory")
    assert present_at == absent_at + 1, "the partition is absent for one store call"


def test_a_crash_at_each_folder_rename_is_rolled_forward_on_hdfs(
    hdfs_root: tuple[HdfsStore, StorePath],
) -> None:
    """The driver dies right after each folder rename of the swaps (a kept folder moved, the
    partition put aside, a partition renamed in), the moments a partition is absent or half
    carried over; a later try finishes the job exactly as a clean run does."""
    store, root = hdfs_root
    job_id = uuid.uuid4().hex
    clean = FaultInjectingStore(store)
    clean_table = root.join("clean")
    write_table(store, clean_table)
    run_replace("manifest", clean, clean_table, job_id)
    renames = [call.index for call in clean.calls if call.op == "rename_directory"]
    assert len(renames) == 4, "dt=1's kept folder, dt=1 aside, dt=1 in, dt=3 in"
    for number, point in enumerate(renames):
        table = root.join(f"crash-{number}")
        write_table(store, table)
        faulty = FaultInjectingStore(store)
        faulty.inject(at=point, mode="crash_after")
        with pytest.raises(SimulatedCrash):
            run_replace("manifest", faulty, table, job_id)
        faulty.revive()
        assert job_control.finish_or_fence(faulty, table, job_id, "manifest").committed
        assert_replaced(store, table, job_id)


@pytest.mark.spark
@pytest.mark.hadoop_peers
@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_replace_matches_sparks_dynamic_overwrite_on_hdfs(
    spark: Any,
    hdfs_root: tuple[HdfsStore, StorePath],
    hadoop_cluster: HadoopCluster,
    committer: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The oracle on hdfs:// through the suite's Spark session: Spark's dynamic overwrite and our
    ``write_committed(..., conflict_mode="replace")`` give the same folders and rows. The tasks
    reach WebHDFS by the setting the driver has (the session's executor environment)."""
    from airflow_commit_provider.core.store.settings import ENV_WEBHDFS_URL

    store, root = hdfs_root
    oracle, ours = str(root.join("spark")), str(root.join("ours"))
    monkeypatch.setenv(ENV_WEBHDFS_URL, hadoop_cluster.webhdfs_url)
    monkeypatch.setitem(spark.sparkContext.environment, ENV_WEBHDFS_URL, hadoop_cluster.webhdfs_url)
    assert_replace_matches_sparks(spark, store, oracle, ours, committer)
