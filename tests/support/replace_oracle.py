"""Spark's own dynamic partition overwrite as the oracle for ``replace`` on a rename store: one
table, one overwrite, once through Spark's commit protocol (``jvm_committer_conf(..., "file-v1",
dynamic_partition_overwrite=True)``: it stages under ``.spark-staging-<job>`` and renames each
partition into place at job commit) and once through ours; the folders and the rows must match.

The table starts with ``dt=a`` (2 rows), ``dt=b`` (3) and ``dt=c`` (1), written by Spark's own
writer; the overwrite brings 4 new rows of ``dt=b`` and 2 of a new ``dt=d``.
"""

from __future__ import annotations

from typing import Any

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf

#: (dt, tag) -> rows, after the overwrite: dt=b replaced, dt=d added, dt=a and dt=c kept.
EXPECTED_ROWS = {("a", "old"): 2, ("b", "new"): 4, ("c", "old"): 1, ("d", "new"): 2}


def frame(spark: Any, day: str, rows: int, tag: str) -> Any:
    return spark.range(rows, numPartitions=1).selectExpr("id", f"'{tag}' AS tag", f"'{day}' AS dt")


def overwrite(spark: Any) -> Any:
    """The rows that replace their partitions, from two tasks."""
    return frame(spark, "b", 4, "new").unionByName(frame(spark, "d", 2, "new"))


def write_initial(spark: Any, location: str) -> None:
    initial = frame(spark, "a", 2, "old").unionByName(frame(spark, "b", 3, "old"))
    with applied_conf(spark, jvm_committer_conf(location, "file-v1")):
        initial.unionByName(frame(spark, "c", 1, "old")).write.partitionBy("dt").parquet(location)


def sparks_replace(spark: Any, location: str) -> None:
    """The oracle: Spark's ``mode("overwrite").partitionBy("dt")`` with dynamic overwrite."""
    write_initial(spark, location)
    with applied_conf(spark, jvm_committer_conf(location, "file-v1", dynamic_partition_overwrite=True)):
        overwrite(spark).write.mode("overwrite").partitionBy("dt").parquet(location)


def table_state(spark: Any, store: Store, location: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The table's visible partition folders and its rows, read back by Spark."""
    folders = [
        name for name in store.list_child_dirs(StorePath.parse(location)) if not name.startswith(("_", "."))
    ]
    rows = sorted(tuple(row) for row in spark.read.parquet(location).select("id", "tag", "dt").collect())
    return folders, rows


def assert_replace_matches_sparks(spark: Any, store: Store, oracle: str, ours: str, committer: str) -> None:
    """Spark's dynamic overwrite at `oracle`, ours (``write_committed(..., conflict_mode="replace")``
    with `committer`) at `ours`: the same partition folders and rows, and the expected ones."""
    from airflow_commit_provider.spark import write_committed

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


def rows_by_partition(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for _id, tag, day in rows:
        counts[(day, tag)] = counts.get((day, tag), 0) + 1
    return counts
