"""What the scenarios that race Hadoop's own committers (JVM) share: Spark's classic
FileOutputCommitter baseline, and S3A's own request counters.

S3A counts every request it makes in its filesystem's IOStatistics (``store_io_request``: each HTTP
request the AWS SDK sent, retries included) and the bytes it copied (``files_copied_bytes``: a
rename on S3 is a copy). The JVM keeps one S3A filesystem per bucket, and in local mode the driver
and every task share it, so the difference of its counters across a write is the write's requests.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_commit_provider.core.formats.jsonio import read_iostatistics
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf

#: S3A's count of HTTP requests (the AWS SDK's RequestCount metric, retries included).
S3A_REQUESTS = "store_io_request"
#: Bytes S3A copied inside the store (CopyObject: how S3A renames).
S3A_BYTES_COPIED = "files_copied_bytes"
#: S3A's CompleteMultipartUpload count for committed files (its committer statistic).
S3A_COMMITS = "committer_commits_completed"
#: S3A's counters of one request each, by kind (HEAD, LIST, GET, PUT, DELETE, copy, multipart), for
#: the breakdown of `S3A_REQUESTS`.
S3A_REQUEST_KINDS = (
    "object_metadata_request",
    "object_list_request",
    "object_continue_list_request",
    "action_http_get_request",
    "object_put_request",
    "object_delete_request",
    "object_bulk_delete_request",
    "object_copy_requests",
    "object_multipart_initiated",
    "multipart_upload_part_put",
    S3A_COMMITS,
    "object_multipart_aborted",
    "multipart_upload_list",
)


def file_v1_conf(scheme: str) -> dict[str, str]:
    """Spark's classic commit on `scheme`: its own commit protocol and FileOutputCommitter, algorithm 1.

    The conf `jvm_committer_conf` gives for `file-v1` without the cloud binding on file://, with the
    committer factory moved to `scheme`. It refuses `file-v1` on S3 (each rename is a copy): the
    benchmarks run it there on purpose, as the baseline a user without the S3A committers gets.
    """
    factory = "spark.hadoop.mapreduce.outputcommitter.factory.scheme."
    conf = jvm_committer_conf("file:///tmp", "file-v1", bind_commit_protocol=False)
    return {(factory + scheme if key == factory + "file" else key): value for key, value in conf.items()}


def s3a_statistics(spark: Any, bucket: str) -> IOStatistics:
    """A snapshot of the JVM's S3A filesystem statistics for `bucket` (cumulative since it was made);
    `.counters_since(earlier.counters)` gives what a stretch of work added."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/")
    filesystem = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    statistics = jvm.org.apache.hadoop.fs.statistics
    snapshot = statistics.IOStatisticsSupport.snapshotIOStatistics(filesystem.getIOStatistics())
    return read_iostatistics(
        json.loads(statistics.IOStatisticsSnapshot.serializer().toJson(snapshot)),
        "Hadoop's IOStatisticsSnapshot",
    )
