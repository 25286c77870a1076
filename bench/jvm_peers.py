"""What the scenarios that race Hadoop's own committers (JVM) share: Spark's classic
FileOutputCommitter baseline, S3A's own request counters, and Spark's own measure of a write's job
commit (`spark_job_commit_seconds`: Hadoop's committers time their commitJob in their `_SUCCESS`,
except FileOutputCommitter, whose marker is empty; Spark times it for every committer).

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


#: Spark's SQL metric of a file write's `commitJob` (`BasicWriteJobStatsTracker`): the protocol's
#: job commit, Hadoop's committer's `commitJob` within it, timed by Spark whatever the committer.
SPARK_JOB_COMMIT_METRIC = "job commit time"
#: How Spark renders a duration (`Utils.msDurationToString`): "345 ms", "1.2 s", "3.5 m", "1.1 h".
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def sql_execution_mark(spark: Any) -> int:
    """The newest SQL execution's ID in the session's status store (-1 for none): a mark for
    `spark_job_commit_seconds`."""
    newest = _recent_executions(spark, 1)
    return int(newest.apply(0).executionId()) if newest.size() else -1


def spark_job_commit_seconds(spark: Any, mark: int) -> float:
    """The job commit time Spark measured for the newest file write among the SQL executions after
    `mark` (`sql_execution_mark` before the write); RuntimeError if there is none. Spark rounds it
    to 0.1 s from 1 s on ("1.2 s")."""
    store = spark._jsparkSession.sharedState().statusStore()
    executions = _recent_executions(spark, _RECENT)
    for index in reversed(range(executions.size())):
        execution = executions.apply(index)
        if execution.executionId() <= mark:
            break
        metrics = execution.metrics()
        accumulators = {
            metrics.apply(i).accumulatorId()
            for i in range(metrics.size())
            if metrics.apply(i).name() == SPARK_JOB_COMMIT_METRIC
        }
        if not accumulators:
            continue
        values = store.executionMetrics(execution.executionId()).iterator()
        while values.hasNext():
            entry = values.next()
            if entry._1() in accumulators:
                return _duration_seconds(entry._2())
        raise RuntimeError(f"SQL execution {execution.executionId()} has no {SPARK_JOB_COMMIT_METRIC!r}")
    raise RuntimeError(f"no file write among the SQL executions after {mark}")


#: How many of the newest SQL executions `spark_job_commit_seconds` looks through for the write.
_RECENT = 16


def _recent_executions(spark: Any, count: int) -> Any:
    """The newest `count` SQL executions of the status store (a Scala Seq, oldest first), once
    Spark's listener bus is drained: the status listener runs on it, so every event posted so far
    (a write's start, its metric updates) has been applied."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()
    total = int(store.executionsCount())
    return store.executionsList(max(total - count, 0), count)


def _duration_seconds(text: str) -> float:
    number, unit = text.split()
    return float(number) * _DURATION_UNITS[unit]
