"""A Spark write to a store that ignores ``If-None-Match: *`` is refused at job setup, before any
Spark job runs, and leaves nothing in the store; declared trusted, it runs.

The store is the embedded S3 behind `IfNoneMatchIgnoringProxy` (tests/support/ignoring_store.py).
Both entry points that set up jobs on the driver are covered: ``write_committed`` and the
``committed`` data source (the operator's job runs one of them inside spark-submit).
"""

from __future__ import annotations

from typing import Any

import pytest
from spark_support import sample_df
from support.ignoring_store import IfNoneMatchIgnoringProxy, ignoring_proxy_fixture  # noqa: F401

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.check import CONDITIONAL_CREATE, CONDITIONAL_CREATE_ENV
from airflow_commit_provider.spark import register_data_source, write_committed

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def _bucket_contents(embedded_s3: Any, bucket: str) -> tuple[list[str], list[str]]:
    with embedded_s3.store().session() as store:
        root = StorePath("s3", bucket, "")
        return (
            sorted(status.path.key for status in store.list_files(root)),
            sorted(upload.path.key for upload in store.list_multipart_uploads(root)),
        )


@pytest.mark.parametrize("entry", ["write_committed", "data_source"])
def test_spark_write_is_refused_before_any_work(
    spark: Any,
    embedded_s3: Any,
    s3_bucket: str,
    s3_options: dict[str, Any],
    ignoring_proxy: IfNoneMatchIgnoringProxy,
    monkeypatch: pytest.MonkeyPatch,
    entry: str,
) -> None:
    monkeypatch.delenv(CONDITIONAL_CREATE_ENV, raising=False)
    options = {**s3_options, "s3.endpoint_url": ignoring_proxy.endpoint_url}
    destination = f"s3://{s3_bucket}/out"
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))

    with pytest.raises(Exception) as refused:
        if entry == "write_committed":
            write_committed(
                sample_df(spark), destination, format="parquet", committer="magic", options=options
            )
        else:
            register_data_source(spark)
            sample_df(spark).write.format("committed").mode("append").options(
                committer="magic", **options
            ).save(destination)

    message = str(refused.value)
    assert f"{ignoring_proxy.endpoint_url}, bucket {s3_bucket} fails {CONDITIONAL_CREATE}" in message
    assert f"{CONDITIONAL_CREATE_ENV}=trusted" in message
    assert embedded_s3.secret_key not in message
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) == jobs_before, "no Spark job ran"
    assert _bucket_contents(embedded_s3, s3_bucket) == ([], [])


def test_spark_write_runs_on_a_store_declared_trusted(
    spark: Any,
    embedded_s3: Any,
    s3_bucket: str,
    s3_options: dict[str, Any],
    ignoring_proxy: IfNoneMatchIgnoringProxy,
) -> None:
    """The user's explicit statement (the ``s3.conditional_create`` setting) skips the probe."""
    options = {
        **s3_options,
        "s3.endpoint_url": ignoring_proxy.endpoint_url,
        "s3.conditional_create": "trusted",
    }
    summary = write_committed(
        sample_df(spark), f"s3://{s3_bucket}/out", format="parquet", committer="magic", options=options
    )
    assert summary.rows == 40
    keys, uploads = _bucket_contents(embedded_s3, s3_bucket)
    assert uploads == [] and "out/_SUCCESS" in keys
