"""Three days committing at once to one table: Hadoop's committers (Spark's own ``df.write``) and
ours, under one choreography, and what each leaves in the table.

Day 2's job starts first, in a thread: its task 0 writes its 4 rows and commits; its task 1 is held
in the JVM (``TaskGate``) before it writes anything. While day 2 is in flight (its committed task's
output waits as pending uploads or as task output under a temporary directory), day 1's job runs from
start to end, then day 3's. Then day 2's task 1 goes on and day 2's job commits. Every job writes
``dt=<day>`` of the same table, 8 rows, one file per row; each runs in a session of its own on the
shared SparkContext, as separate applications would.

What was observed (PySpark 4.2.0, hadoop-aws 3.5.0, spark-hadoop-cloud 4.1.2, the embedded SeaweedFS):

- **S3A magic, S3A partitioned with replace** (defaults): day 1's job cleanup aborts every pending
  upload under the table (``fs.s3a.committer.abort.pending.uploads``, default true), day 2's
  included. Day 2's job commit then fails with ``NoSuchUpload``: day 2 has no rows; its job must run
  again. Nothing is left pending.
- **S3A magic with ``abort.pending.uploads=false``** (Hadoop's advice for concurrent writers): all
  three days land (but then no job cleanup aborts a failed job's uploads).
- **FileOutputCommitter v1 over s3a** (Spark's own protocol, what ``df.write`` does without
  spark-hadoop-cloud): the jobs share ``_temporary/0`` (SPARK-36571). Day 1's job commit publishes
  day 2's committed task, so a reader sees half of day 2 while day 2 is still running, and deletes
  ``_temporary``; day 2's remaining task then commits into a fresh one and the table ends complete.
- **Manifest committer on file://**: day 1's job cleanup deletes the whole ``_temporary`` directory,
  day 2's job directory (its task 0's manifest and files) included. Day 2's job then *succeeds* with
  only task 1's rows: half of day 2 is lost silently, and the table's ``_SUCCESS`` (day 2's) says
  success.
- **Ours, partitioned with replace**: all three days land exactly, each with its own partition
  ``_SUCCESS``, nothing pending or left behind: every job cleans up only what its own records name.
  Three days committing at the very same moment are in tests/airflow/test_parallel_days.py.

The S3A and manifest rows document Hadoop's behaviour, defects included, as observed: if a future
Hadoop fixes one, its row fails and the table in docs/how-a-commit-works.md must change with it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from side_by_side_support import (
    EVENT_BOUND_SECONDS,
    day_session,
    ids,
    rows_by,
    spark_file_output_conf,
    stage_progress,
    success_values,
    temp_objects,
    uploads_left,
)
from support.task_gate import TaskGate
from support.waiting import wait_until

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import jvm_committer_conf, write_committed

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.hadoop_peers]

DAYS = ("day1", "day2", "day3")
ROWS_PER_DAY = 8


@dataclass(frozen=True)
class Expected:
    """What the table shows at the end, and what a reader saw while day 2 was in flight."""

    day2_error: str | None
    """A fragment of the error day 2's write ended with; None: it succeeded (days 1 and 3 always do)."""
    day2_rows: int
    """Day 2's rows read back at the end (days 1 and 3: all 8)."""
    day2_seen_early: int = 0
    """Day 2's rows a reader saw after day 1 committed, while day 2 still ran."""
    success_days: set[str] | None = field(default_factory=lambda: {"day3"})
    """The days whose files the table's final ``_SUCCESS`` names; None: a 0-byte marker."""


@dataclass(frozen=True)
class Contender:
    name: str
    conf: Callable[[str, Path], dict[str, str]]
    """Spark conf for one day's job (built per job: a manifest job carries a UUID of its own)."""
    expected: Expected
    local: bool = False
    ours: bool = False


def s3a(committer: str, **extra: str) -> Callable[[str, Path], dict[str, str]]:
    def conf(destination: str, tmp_path: Path) -> dict[str, str]:
        options = {"conflict_mode": "replace"} if committer == "partitioned" else {}
        built = jvm_committer_conf(destination, committer, **options)
        if committer == "partitioned":  # the staging committer's upload lists, on the cluster FS
            built["spark.hadoop.fs.s3a.committer.staging.tmp.path"] = (tmp_path / "staging").as_uri()
        return {**built, **{f"spark.hadoop.{key}": value for key, value in extra.items()}}

    return conf


CONTENDERS = [
    Contender("hadoop-s3a-magic", s3a("magic"), Expected("NoSuchUpload", day2_rows=0)),
    Contender(
        "hadoop-s3a-magic-keep-pending-uploads",
        s3a("magic", **{"fs.s3a.committer.abort.pending.uploads": "false"}),
        Expected(None, day2_rows=8, success_days={"day2"}),
    ),
    Contender("hadoop-s3a-partitioned-replace", s3a("partitioned"), Expected("NoSuchUpload", day2_rows=0)),
    Contender(
        "spark-file-output-v1-s3a",
        lambda _destination, _tmp: spark_file_output_conf(),
        Expected(None, day2_rows=8, day2_seen_early=4, success_days=None),
    ),
    Contender(
        "hadoop-manifest-file",
        lambda destination, _tmp: jvm_committer_conf(destination, "manifest"),
        Expected(None, day2_rows=4, success_days={"day2"}),
        local=True,
    ),
    Contender(
        "ours-partitioned-replace",
        lambda _destination, _tmp: {},
        Expected(None, day2_rows=8, success_days={"day2"}),
        ours=True,
    ),
]


def day_frame(session: Any, day: str, partitions: int, gate: str = "''") -> Any:
    """The day's 8 rows (ids unique across days) in `partitions` tasks; ``gate`` holds chosen rows."""
    offset = DAYS.index(day) * 100
    return session.range(ROWS_PER_DAY, numPartitions=partitions).selectExpr(
        f"id + {offset} AS id", f"concat('{day}', {gate}) AS dt"
    )


def hadoop_write(df: Any, destination: str) -> None:
    df.write.option("maxRecordsPerFile", 1).mode("append").partitionBy("dt").parquet(destination)


@pytest.mark.parametrize("contender", CONTENDERS, ids=lambda c: c.name)
def test_three_days_at_once(
    s3a_spark: Any,
    contender: Contender,
    spark_bucket: str,
    spark_s3_store: Any,
    s3_options: dict[str, Any],
    tmp_path: Path,
) -> None:
    spark = s3a_spark
    if contender.local:
        table = StorePath.parse(str(tmp_path / "table"))
        store: Any = LocalStore()
        write_at = read_at = (tmp_path / "table").as_uri()
    else:
        table = StorePath("s3", spark_bucket, f"days-{uuid.uuid4().hex[:12]}")
        store = spark_s3_store
        read_at = f"s3a://{table.bucket}/{table.key}"
        write_at = str(table) if contender.ours else read_at

    def write(day: str, partitions: int, gate: str = "''") -> str | None:
        """One day's job in a session of its own; the error it ended with, if any."""
        session = day_session(spark, contender.conf(write_at, tmp_path))
        df = day_frame(session, day, partitions, gate)
        try:
            if contender.ours:
                options = {**s3_options, "maxRecordsPerFile": 1}
                write_committed(
                    df,
                    write_at,
                    partition_by="dt",
                    committer="partitioned",
                    conflict_mode="replace",
                    options=options,
                )
            else:
                hadoop_write(df, write_at)
        except Exception as error:  # what the job ended with is the observation
            return str(error)
        return None

    errors: dict[str, str | None] = {}
    group = f"day2-{uuid.uuid4().hex}"
    gate = TaskGate(tmp_path / "day2-task1")

    def day2() -> None:
        spark.sparkContext.setJobGroup(group, "day 2, in flight while days 1 and 3 commit")
        errors["day2"] = write("day2", 2, gate.column("id = 4"))

    running = threading.Thread(target=day2, name="day2")
    with gate.opened_at_exit(running):
        running.start()
        wait_until(
            lambda: stage_progress(spark, group) == (1, 1) or "day2" in errors,
            "day 2's task 0 committed while its task 1 waits at the gate",
            EVENT_BOUND_SECONDS,
        )
        assert "day2" not in errors, f"day 2 ended before it was held: {errors['day2']}"
        in_flight = uploads_left(store, table) + temp_objects(store, table)
        assert in_flight, "day 2's committed task left nothing in flight (no upload, no task output)"

        errors["day1"] = write("day1", 1)
        seen_early = rows_by(spark, read_at, "dt")["day2"]
        errors["day3"] = write("day3", 1)
        gate.open()
        running.join(EVENT_BOUND_SECONDS)
    assert not running.is_alive(), "day 2's job never ended"

    assert errors["day1"] is None and errors["day3"] is None, errors
    expected = contender.expected
    if expected.day2_error is None:
        assert errors["day2"] is None, errors["day2"]
    else:
        assert errors["day2"] is not None and expected.day2_error in errors["day2"], errors["day2"]
    rows = rows_by(spark, read_at, "dt")
    assert rows == {"day1": ROWS_PER_DAY, "day3": ROWS_PER_DAY} | (
        {"day2": expected.day2_rows} if expected.day2_rows else {}
    ), rows
    read_back = ids(spark, read_at)
    assert len(read_back) == len(set(read_back)), "a row was read back twice"
    assert seen_early == expected.day2_seen_early, (
        f"a reader saw {seen_early} of day 2's rows before it committed"
    )
    assert success_values(store, table, "dt") == expected.success_days
    assert uploads_left(store, table) == []
    assert temp_objects(store, table) == []
