"""Writing to a catalog table by name: its location, format and partition columns from the
catalog, the DataFrame checked against it before any work, and the table created on request.

``create_table=True`` creates a missing table as ``saveAsTable`` would (``CREATE TABLE .. USING
<format> PARTITIONED BY ..``): under the warehouse, or at ``destination`` when one is given with the table
(an external table), unless another writer created it meanwhile: that table is then checked and used.
Given with an existing table, ``destination`` must be the table's location.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core import job_control
from airflow_commit_provider.core.catalog import (
    Catalog,
    TableInfo,
    TableNotFoundError,
    location_text,
    register_table_partitions,
)
from airflow_commit_provider.core.committers.registry import default_committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.core.table_checks import check_write
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.catalog import SparkCatalog, quote_identifier, sql_string
from airflow_commit_provider.spark.write_plan import SparkWritePlan, plan_write

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


def plan_committed_write(
    df: DataFrame,
    destination: str | os.PathLike[str] | StorePath | None = None,
    *,
    table: str | None = None,
    create_table: bool = False,
    format: str | None = None,
    partition_by: str | Sequence[str] = (),
    committer: str | None = None,
    conflict_mode: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> SparkWritePlan:
    """``write_committed``'s plan: to `destination`, or to `table` (or the conf's table when neither is given)."""
    conf = cfg.SparkConf(df.sparkSession)
    expected_location: str | os.PathLike[str] | StorePath | None = destination
    if table is None and destination is None:
        # The operator sets both: the destination is where its store checks look for the table.
        table, expected_location = conf.get(cfg.CONF_TABLE), conf.get(cfg.CONF_DESTINATION)
    columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    if table is not None:
        if destination is not None and not create_table:
            raise ValueError(
                f"pass destination or table={table!r}, not both (a destination names where create_table=True creates it)"
            )
        info = table_for_write(
            df,
            SparkCatalog(df.sparkSession),
            table,
            format=format,
            partition_by=columns,
            create_table=create_table,
            destination=expected_location,
        )
        destination, format, columns = info.location, info.format, info.partition_columns
    elif create_table:
        raise ValueError("create_table=True needs table=")
    return plan_write(
        destination,
        conf=conf,
        format=format or "parquet",
        partition_by=columns,
        committer=committer,
        conflict_mode=conflict_mode,
        options=options,
        table=table,
    )


def finish_table_write(
    spark: Any, table: str, job_id: str, *, catalog: Catalog | None = None, **s3: Any
) -> SuccessData | None:
    """Bring a table write that stopped after its commit point to its end: roll the commit
    forward if its record is missing, then register its partitions; a job that never reached its
    commit point is fenced (None). What a resumed driver calls, and the registration-only
    application (``spark.finish_registration``) that the operator submits for a try or an adopting
    retry that finds the registration pending.

    `s3`: the store's S3 settings (``endpoint_url``, ``aws_access_key_id``...) for an S3 table.
    `spark` may be None when `catalog` is given: a data source table write is finished through its
    Thrift metastore (``HiveMetastoreCatalog(uri)``) without Spark.
    """
    if catalog is None:
        if spark is None:
            raise ValueError("finish_table_write needs a SparkSession or a catalog=")
        catalog = SparkCatalog(spark)
    location = catalog.table_info(table).location
    store = open_store(location, **s3)
    try:
        # The outcome names the committer of a job past its commit point; any other is only fenced.
        fallback = default_committer(location, False, "append")
        status = job_control.finish_or_fence(store, location, job_id, fallback, reason="resumed")
        if status.record is None:
            return None
        return register_table_partitions(catalog, store, location, status.record)
    finally:
        store.close()


def table_for_write(
    df: DataFrame,
    catalog: Catalog,
    name: str,
    *,
    format: str | None,
    partition_by: Sequence[str],
    create_table: bool,
    destination: str | os.PathLike[str] | StorePath | None,
) -> TableInfo:
    """The table `df` is written to, after checking that `df` fits it; ValueError names the table
    and the argument or column that does not."""
    try:
        table = catalog.table_info(name)
    except TableNotFoundError:
        if not create_table:
            raise TableNotFoundError(
                f"table {name} does not exist (pass create_table=True to create it)"
            ) from None
        _create_table(df, name, format or "parquet", partition_by, destination)
        table = catalog.table_info(name)
    expected = None if destination is None else StorePath.parse(destination)
    check_write(
        table, schema_columns(df.schema), format=format, partition_by=partition_by, destination=expected
    )
    return table


def schema_columns(schema: StructType) -> list[tuple[str, str]]:
    """What is written, as the catalog describes a table's columns: (name, Spark simple type string)."""
    return [(field.name, field.dataType.simpleString()) for field in schema.fields]


def _create_table(
    df: DataFrame,
    name: str,
    format: str,
    partition_by: Sequence[str],
    destination: str | os.PathLike[str] | StorePath | None,
) -> None:
    columns = ", ".join(
        f"{quote_identifier(field.name)} {field.dataType.simpleString()}" for field in df.schema.fields
    )
    # IF NOT EXISTS: a table that another writer created meanwhile is used, and checked, as found.
    statement = f"CREATE TABLE IF NOT EXISTS {name} ({columns}) USING {format}"
    if partition_by:
        statement += f" PARTITIONED BY ({', '.join(quote_identifier(c) for c in partition_by)})"
    if destination is not None:
        statement += f" LOCATION {sql_string(location_text(StorePath.parse(destination)))}"
    df.sparkSession.sql(statement)
