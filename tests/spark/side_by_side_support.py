"""Helpers of the side-by-side tests: one fault, run on Hadoop's committers (through Spark's own
``df.write``) and on ours, and what the store then holds.

- :func:`day_session` gives each concurrent writer a session of its own (its own SQL conf, the
  shared SparkContext), as separate applications would have;
- :func:`stage_progress` is what Spark's scheduler says about a job group's tasks;
- the rest reads the store: rows per value as Spark reads them back, pending uploads, temporary
  objects, what a ``_SUCCESS`` lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from support.invariants import is_temp, pending_uploads

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import SUCCESS_FILENAME
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.spark.jvm_committers import PARQUET_OUTPUT_COMMITTER, SPARK_COMMIT_PROTOCOL
from airflow_commit_provider.spark.session_conf import runtime_key

#: Bound of every wait on a Spark job, a thread or a gate (a broken run fails, never hangs).
EVENT_BOUND_SECONDS = 120.0


def spark_file_output_conf() -> dict[str, str]:
    """What ``df.write`` to ``s3a://`` does without spark-hadoop-cloud: Spark's own commit protocol
    and Parquet committer, i.e. the classic FileOutputCommitter (v1), whose renames are copies on S3.

    ``jvm_committer_conf`` refuses ``file-v1`` on S3, so this is spelled out here. It must be set
    explicitly because the session has spark-hadoop-cloud on its classpath, which makes the S3A
    magic committer Spark's default (SPARK-47618).
    """
    return {
        "spark.sql.sources.commitProtocolClass": SPARK_COMMIT_PROTOCOL,
        "spark.sql.parquet.output.committer.class": PARQUET_OUTPUT_COMMITTER,
        "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "1",
    }


def day_session(spark: Any, conf: Mapping[str, str]) -> Any:
    """A new session on the shared SparkContext with `conf` applied and S3A pointed where `spark`
    points it (its runtime ``fs.s3a.*`` settings): concurrent writers must not share the session
    conf (the manifest committer's job-setup UUID lives there)."""
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key.startswith("fs.s3a."):
            session.conf.set(key, value)
    for key, value in conf.items():
        session.conf.set(runtime_key(key), value)
    return session


def stage_progress(spark: Any, group: str) -> tuple[int, int]:
    """(completed, running) tasks of the first stage of job group `group` that has both, else of
    all its stages together: what the scheduler has seen, with each task's commit inside it."""
    tracker = spark.sparkContext.statusTracker()
    completed = running = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            if stage.numCompletedTasks and stage.numActiveTasks:
                return stage.numCompletedTasks, stage.numActiveTasks
            completed += stage.numCompletedTasks
            running += stage.numActiveTasks
    return completed, running


def rows_by(spark: Any, location: str, column: str) -> Counter[str]:
    """How many rows Spark reads back for each value of `column` (nothing there: empty)."""
    try:
        found = spark.read.parquet(location).groupBy(column).count().collect()
    except Exception as error:
        if "PATH_NOT_FOUND" in str(error):
            return Counter()
        raise
    return Counter({row[column]: row["count"] for row in found})


def ids(spark: Any, location: str) -> list[int]:
    """Every ``id`` Spark reads back, sorted, duplicates kept."""
    return sorted(row.id for row in spark.read.parquet(location).select("id").collect())


def temp_objects(store: Store, destination: StorePath) -> list[str]:
    """Hidden objects other than commit records (``_SUCCESS`` files, our job records) and the
    ``.<name>.crc`` checksum that Hadoop's local filesystem keeps beside each file ``<name>``."""
    names = {status.path.relative_to(destination) for status in store.list_files(destination)}

    def checksum_of_a_file(relative: str) -> bool:
        folder, _, name = relative.rpartition("/")
        data = name.removeprefix(".").removesuffix(".crc")
        return name.startswith(".") and name.endswith(".crc") and f"{folder}/{data}".lstrip("/") in names

    return sorted(name for name in names if is_temp(name) and not checksum_of_a_file(name))


def uploads_left(store: Store, destination: StorePath) -> list[str]:
    """Pending multipart uploads under the destination (local stores have none)."""
    return pending_uploads(store, destination)


def success_values(store: Store, destination: StorePath, column: str) -> set[str] | None:
    """The values of partition column `column` among the files the table's ``_SUCCESS`` names
    (Hadoop's ``filenames`` and ours alike), ``None`` for the classic 0-byte marker."""
    path = destination.join(SUCCESS_FILENAME)
    data = store.read_bytes(path)
    if not data:
        return None
    return {
        part.split("=", 1)[1]
        for name in SuccessData.from_bytes(data, str(path)).filenames
        for part in name.split("/")
        if part.startswith(f"{column}=")
    }
