"""Whether a write fits the catalog table it goes to, checked before any work.

One owner for both routes to a table: ``write_committed(table=...)`` (``spark.tables``, its catalog
a SparkSession's) and ``df.write.format("committed").option("table", ...)`` (``spark.datasource``,
whose driver side has no session and asks a Thrift metastore). Both describe what they write as
(column, Spark simple type string) pairs, as the catalog describes the table (`TableInfo`).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_commit_provider.core.catalog import TableInfo
from airflow_commit_provider.core.paths import StorePath, same_path


def check_write(
    table: TableInfo,
    columns: Sequence[tuple[str, str]],
    *,
    format: str | None,
    partition_by: Sequence[str],
    destination: StorePath | None,
) -> None:
    """ValueError naming the table and the argument or column that does not fit: a `destination` other
    than the table's location, a `format` or `partition_by` that differs from the table's, a
    column the table lacks or has with another type, or a column of the table that is missing."""
    name = table.name
    if destination is not None and not same_path(destination, table.location):
        raise ValueError(f"table {name} is at {table.location}, not at destination={str(destination)!r}")
    if format is not None and format.lower() != table.format:
        raise ValueError(f"table {name} is stored as {table.format}, not format={format!r}")
    if partition_by and [c.lower() for c in partition_by] != [c.lower() for c in table.partition_columns]:
        raise ValueError(
            f"table {name} is partitioned by {list(table.partition_columns)}, not partition_by={list(partition_by)}"
        )
    check_columns(table, columns)


def check_columns(table: TableInfo, columns: Sequence[tuple[str, str]]) -> None:
    """Every column of the table among `columns` with the same type, and no other column
    (names compared case-insensitively, as Spark's catalog does)."""
    written = {column.lower(): (column, type_name) for column, type_name in columns}
    expected = {column.lower(): (column, type_name) for column, type_name in table.columns}
    for key, (column, type_name) in written.items():
        if key not in expected:
            raise ValueError(f"column {column!r} is not a column of table {table.name}")
        expected_type = expected[key][1]
        if type_name != expected_type:
            raise ValueError(
                f"column {column!r} is {type_name} in the DataFrame but {expected_type} in table {table.name}"
            )
    for key, (column, _) in expected.items():
        if key not in written:
            raise ValueError(f"column {column!r} of table {table.name} is missing from the DataFrame")
