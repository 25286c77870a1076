"""``replace`` with the rename committers on local files against its oracle, Spark's own dynamic
partition overwrite on the same store through the suite's Spark session: the same partition
folders and the same rows (tests/support/replace_oracle.py; on HDFS in
tests/hadoop/test_hdfs_replace.py).

Cost: per committer, three small Spark writes and two reads (about 3-6 s on the shared session).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.replace_oracle import (
    EXPECTED_ROWS,
    overwrite,
    rows_by_partition,
    sparks_replace,
    table_state,
    write_initial,
)

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import write_committed

pytestmark = [pytest.mark.spark, pytest.mark.hadoop_peers]


@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_replace_matches_sparks_dynamic_overwrite_on_local_files(
    spark: Any, tmp_path: Any, committer: str
) -> None:
    store = LocalStore()
    oracle, ours = f"file://{tmp_path}/spark", f"file://{tmp_path}/ours"
    sparks_replace(spark, oracle)
    write_initial(spark, ours)
    summary = write_committed(
        overwrite(spark), ours, partition_by="dt", committer=committer, conflict_mode="replace"
    )
    assert summary.committer == committer
    expected = table_state(spark, store, oracle)
    assert table_state(spark, store, ours) == expected
    assert expected[0] == ["dt=a", "dt=b", "dt=c", "dt=d"]
    assert rows_by_partition(expected[1]) == EXPECTED_ROWS
    # Hidden files stay, as replace keeps them: here the `.crc` files Hadoop wrote beside the initial ones.
    assert not store.directory_exists(StorePath.parse(ours).join("_temporary")), "the job's folder is gone"
