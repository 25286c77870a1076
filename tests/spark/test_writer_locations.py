"""`write_committed` takes its destination literally, as `df.write` with hadoop-aws and the AWS CLI
do: `%41`, `%`, `#`, `?` and spaces in the path are part of the key (the location contract)."""

from __future__ import annotations

import pytest
from spark_support import assert_committed_write, sample_df

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import write_committed

pytestmark = pytest.mark.spark

TRICKY_DIR = "reports %41/k=50%25 #1?x"


@pytest.mark.s3
def test_s3_destination_is_taken_literally(
    spark, s3_prefix, s3_options, spark_s3_store, embedded_s3, tmp_path
):
    location = f"{s3_prefix}/{TRICKY_DIR}"
    summary = write_committed(
        sample_df(spark),
        location,
        format="parquet",
        committer="magic",
        options={**s3_options, "threads": 4},
    )
    dest = StorePath.parse(location)
    assert_committed_write(spark_s3_store, dest, summary)
    bucket, prefix = s3_prefix[len("s3://") :].split("/", 1)
    listing = embedded_s3.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{TRICKY_DIR}/")
    keys = [entry["Key"] for entry in listing.get("Contents", [])]
    assert any(key.endswith(".parquet") for key in keys), f"nothing under the literal key: {keys}"
    assert summary.success_file == f"{location}/_SUCCESS"


def test_local_destination_is_taken_literally(spark, tmp_path):
    location = f"file://{tmp_path}/{TRICKY_DIR}"
    summary = write_committed(sample_df(spark), location, format="json", committer="manifest")
    assert_committed_write(LocalStore(), StorePath.parse(location), summary)
    assert any((tmp_path / "reports %41" / "k=50%25 #1?x").glob("part-*.json"))
