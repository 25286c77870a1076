"""`core.catalog.Catalog` over a SparkSession: whatever catalog the session is configured with
(Hive metastore, embedded Derby, AWS Glue through its Hive client factory).

Table descriptions come from ``DESCRIBE TABLE EXTENDED`` and ``spark.catalog.listColumns``;
partitions are registered with one ``ALTER TABLE .. ADD IF NOT EXISTS PARTITION ..`` statement per
``core.catalog.REGISTRATION_BATCH`` partitions (Spark hands each to its Hive client in batches of
``spark.sql.addPartitionInBatch.size``, 100 by default) and a ``SET LOCATION`` for each existing
partition whose location differs. Partition values and locations are quoted as Spark SQL string
literals.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from airflow_commit_provider.core.catalog import (
    REGISTRATION_BATCH,
    CatalogError,
    CatalogUnreachableError,
    Partition,
    TableInfo,
    TableNotFoundError,
    batched,
    location_path,
    location_text,
    partition_name,
    table_format,
)
from airflow_commit_provider.core.paths import same_path


class SparkCatalog:
    """The session's catalog. Errors other than a missing table are CatalogUnreachableError. One
    ``ADD IF NOT EXISTS`` statement names at most `batch_size` partitions."""

    def __init__(self, spark: Any, *, batch_size: int = REGISTRATION_BATCH):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self._spark = spark
        self._batch_size = batch_size

    def table_info(self, name: str) -> TableInfo:
        if not self._call(f"look up table {name}", self._spark.catalog.tableExists, name):
            raise TableNotFoundError(f"table {name} does not exist")
        rows = self._call(f"describe table {name}", lambda: self._sql(f"DESCRIBE TABLE EXTENDED {name}"))
        details = {row["col_name"]: row["data_type"] for row in rows}
        columns = self._call(f"list the columns of {name}", self._spark.catalog.listColumns, name)
        return TableInfo(
            name=name,
            location=location_path(details.get("Location") or ""),
            format=table_format(name, details.get("Provider"), details.get("Serde Library")),
            partition_columns=tuple(column.name for column in columns if column.isPartition),
            columns=tuple((column.name, column.dataType) for column in columns),
        )

    def register_partitions(self, name: str, partitions: Iterable[Partition]) -> None:
        """One ``SHOW PARTITIONS`` (the names of the table's partitions, held while registering),
        then per batch one ``ADD IF NOT EXISTS`` of the batch and, for each partition of it that
        existed before, a ``DESCRIBE`` of its location and ``SET LOCATION`` if it differs (a
        partition just added has the location given). `partitions` is streamed, a batch at a time."""
        batches = batched(partitions, self._batch_size)
        first = next(batches, None)
        if first is None:
            return
        if not self._call(f"look up table {name}", self._spark.catalog.tableExists, name):
            raise TableNotFoundError(f"table {name} does not exist: its partitions cannot be registered")
        shown = self._call(f"list the partitions of {name}", lambda: self._sql(f"SHOW PARTITIONS {name}"))
        existing = {row[0] for row in shown}
        for batch in itertools.chain([first], batches):
            specs = " ".join(
                f"PARTITION ({partition_spec(p)}) LOCATION {sql_string(location_text(p.location))}"
                for p in batch
            )
            self._call(
                f"add partitions to {name}", self._sql, f"ALTER TABLE {name} ADD IF NOT EXISTS {specs}"
            )
            for partition in batch:
                if partition_name(partition) in existing:
                    self._set_location_if_differs(name, partition)

    def _set_location_if_differs(self, name: str, partition: Partition) -> None:
        spec = partition_spec(partition)
        current = self._call(
            f"describe a partition of {name}",
            lambda: self._sql(f"DESCRIBE FORMATTED {name} PARTITION ({spec})"),
        )
        found = next((row["data_type"] for row in current if row["col_name"] == "Location"), "")
        if not found or not same_path(location_path(found), partition.location):
            statement = f"ALTER TABLE {name} PARTITION ({spec}) SET LOCATION {sql_string(location_text(partition.location))}"
            self._call(f"set a partition location of {name}", lambda: self._sql(statement))

    def _sql(self, statement: str) -> list[Any]:
        return list(self._spark.sql(statement).collect())

    @staticmethod
    def _call(action: str, function: Any, *args: Any) -> Any:
        """Run a catalog request; anything it raises but a missing table means the catalog failed."""
        try:
            return function(*args)
        except CatalogError:
            raise
        except Exception as error:
            if type(error).__name__ in ("AnalysisException", "NoSuchTableException") and (
                "TABLE_OR_VIEW_NOT_FOUND" in str(error) or "not found" in str(error).lower()
            ):
                raise TableNotFoundError(f"cannot {action}: {str(error).splitlines()[0]}") from error
            raise CatalogUnreachableError(
                f"cannot {action}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            ) from error


def partition_spec(partition: Partition) -> str:
    """``\\`dt\\` = '2024-01-01', ...`` for a PARTITION clause."""
    return ", ".join(
        f"{quote_identifier(column)} = {'NULL' if value is None else sql_string(value)}"
        for column, value in partition.values
    )


def sql_string(value: str) -> str:
    """A Spark SQL string literal (backslash escapes, as the default parser reads them)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
