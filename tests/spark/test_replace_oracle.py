"""``replace`` with the rename committers on local files against its oracle, Spark's own dynamic
partition overwrite on the same store through the suite's Spark session: the same partition
folders and the same rows (tests/support/replace_oracle.py; on HDFS in
tests/hadoop/test_hdfs_replace.py).

Cost: per committer, three small Spark writes and two reads (about 3-6 s on the shared session).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.replace_oracle import assert_replace_matches_sparks

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore

pytestmark = [pytest.mark.spark, pytest.mark.hadoop_peers]


@pytest.mark.parametrize("committer", ["manifest", "file-v1"])
def test_replace_matches_sparks_dynamic_overwrite_on_local_files(
    spark: Any, tmp_path: Any, committer: str
) -> None:
    store = LocalStore()
    oracle, ours = f"file://{tmp_path}/spark", f"file://{tmp_path}/ours"
    assert_replace_matches_sparks(spark, store, oracle, ours, committer)
    # Hidden files stay, as replace keeps them: here the `.crc` files Hadoop wrote beside the initial ones.
    assert not store.directory_exists(StorePath.parse(ours).join("_temporary")), "the job's folder is gone"
