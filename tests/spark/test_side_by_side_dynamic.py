"""Dynamic partition overwrite (``spark.sql.sources.partitionOverwriteMode=dynamic``) on s3a://, as
Spark's own ``df.write`` does it with Hadoop's committers: what the table holds afterwards.

The table starts with ``dt=a`` (2 rows) and ``dt=b`` (3 rows); the overwrite writes 4 new rows of
``dt=b`` only. Replacing means ``dt=a`` keeps its 2 rows and ``dt=b`` has exactly the 4 new ones.

Observed (hadoop-aws 3.5.0, spark-hadoop-cloud 4.1.2, Spark 4.2.0):

- **S3A magic** (bound through PathOutputCommitProtocol): refused before any work ("PathOutputCommitter
  does not support dynamicPartitionOverwrite"); the table is untouched, nothing left. Our conf refuses
  it first, naming the option (tests/spark/test_hadoop_s3a.py, with the partitioned committer too).
- **FileOutputCommitter v1 over s3a** (Spark's own protocol): replaced, by staging the new files under
  ``.spark-staging-<job>`` and renaming them into place, which S3A does by copying every file.

Elsewhere: Hadoop's manifest committer on file:// *appends* instead of replacing
(tests/spark/test_hadoop_s3a.py::test_manifest_dynamic_partition_overwrite_appends_so_it_is_refused);
ours replaces exactly the partitions a job writes with ``conflict_mode="replace"`` and the partitioned
committer, by completing uploads, no copy (tests/spark/test_partitions.py::test_partitioned_conflict_modes).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from side_by_side_support import spark_file_output_conf, temp_objects, uploads_left

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.hadoop_peers]

DYNAMIC = {"spark.sql.sources.partitionOverwriteMode": "dynamic"}


def frame(spark: Any, day: str, rows: int, tag: str) -> Any:
    return spark.range(rows, numPartitions=1).selectExpr("id", f"'{tag}' AS tag", f"'{day}' AS dt")


@pytest.mark.parametrize(
    ("contender", "refusal", "expected"),
    [
        pytest.param(
            "hadoop-s3a-magic",
            "PathOutputCommitter does not support dynamicPartitionOverwrite",
            {("a", "old"): 2, ("b", "old"): 3},
            id="hadoop-s3a-magic-refuses",
        ),
        pytest.param(
            "spark-file-output-v1-s3a",
            None,
            {("a", "old"): 2, ("b", "new"): 4},
            id="spark-file-output-v1-s3a-replaces",
        ),
    ],
)
def test_dynamic_partition_overwrite(
    s3a_spark: Any,
    spark_bucket: str,
    spark_s3_store: Any,
    contender: str,
    refusal: str | None,
    expected: dict[tuple[str, str], int],
) -> None:
    spark = s3a_spark
    table = StorePath("s3", spark_bucket, f"dynamic-{uuid.uuid4().hex[:12]}")
    location = f"s3a://{table.bucket}/{table.key}"
    conf = (
        jvm_committer_conf(location, "magic") if contender == "hadoop-s3a-magic" else spark_file_output_conf()
    )
    with applied_conf(spark, conf):
        frame(spark, "a", 2, "old").unionByName(frame(spark, "b", 3, "old")).write.partitionBy("dt").parquet(
            location
        )
        with applied_conf(spark, DYNAMIC):
            overwrite = frame(spark, "b", 4, "new").write.mode("overwrite").partitionBy("dt")
            if refusal is None:
                overwrite.parquet(location)
            else:
                with pytest.raises(Exception, match=refusal):
                    overwrite.parquet(location)

    found = spark.read.parquet(location).groupBy("dt", "tag").count().collect()
    assert {(row.dt, row.tag): row["count"] for row in found} == expected
    assert uploads_left(spark_s3_store, table) == []
    assert temp_objects(spark_s3_store, table) == []
