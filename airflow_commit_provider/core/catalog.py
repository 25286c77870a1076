"""Catalog tables: what a committed write needs from a catalog, and registering a job's partitions.

A write to a table takes its location, format and partition columns from the catalog
(`Catalog.table_info`), and after the commit point the partitions the job wrote are registered
there (`Catalog.register_partitions`). The table is named in the job's commit decision (the
outcome) and then in its record, so whoever rolls the commit forward knows it; registration itself
needs a catalog client, which only a driver has (`spark.catalog` over a SparkSession; a Glue one
would be a small class over boto3's ``batch_create_partition``/``update_partition``). The job record
says what was registered (`SuccessData.registered_partitions`), or that registration is pending.

Nothing here imports Spark or Airflow: the committed data source's driver side, which has no
SparkSession, registers through a Thrift metastore (``core.hive_metastore_catalog``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from airflow_commit_provider.core.escaping import DEFAULT_PARTITION_NAME, partition_path, unescape_path_name
from airflow_commit_provider.core.formats.success import InlinePartitions, SuccessData
from airflow_commit_provider.core.job_records import save_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import log
from airflow_commit_provider.core.store.base import Store

#: A Hive-format table's serde names its file format (``STORED AS PARQUET``).
_SERDE_FORMATS = {"parquet": "parquet", "orc": "orc", "json": "json", "lazysimpleserde": "csv"}
#: Partitions per registration request, whatever the job wrote (10,000 partitions is 10 of them).
#: What a Hive metastore accepts in one request is bounded several ways, and 1,000 stays inside all
#: of them: Hive's own client fetches partitions by name 300 at a time
#: (``hive.metastore.batch.retrieve.max``), Impala 1,000 (``...batch.retrieve.table.partition.max``);
#: the metastore turns a list of names into one SQL ``IN`` list, which Oracle caps at 1,000 and SQL
#: Server at 2,100 parameters (``hive.direct.sql.max.elements.in.clause`` is 1,000 for them), and
#: PostgreSQL at 32,767; its server refuses a Thrift message over 100 MiB
#: (``hive.metastore.server.max.message.size``), and each partition sent carries the table's whole
#: storage descriptor (its columns), so 10,000 partitions of a wide table pass it; and one add is
#: one database transaction that checks, for each partition, that it is new and that its directory
#: exists (a request to the store), all within the client's timeout.
REGISTRATION_BATCH = 1000

_T = TypeVar("_T")


class CatalogError(Exception):
    """The catalog refused or failed a request."""


class TableNotFoundError(CatalogError, ValueError):
    """The named table does not exist (a ValueError too: it is bad input when planning a write)."""


class CatalogUnreachableError(CatalogError):
    """The catalog could not be asked; a later driver can finish what was asked of it."""


@dataclass(frozen=True)
class TableInfo:
    name: str
    location: StorePath
    format: str
    """The file format the table's data is in (parquet, orc, csv, json)."""
    partition_columns: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    """Every column, data then partition columns, as (name, Spark simple type string)."""


@dataclass(frozen=True)
class Partition:
    values: tuple[tuple[str, str | None], ...]
    """(column, value) in the table's partition column order; None is Hive's default partition."""
    location: StorePath


class Catalog(Protocol):
    def table_info(self, name: str) -> TableInfo:
        """The table's description; TableNotFoundError if it does not exist."""
        ...

    def register_partitions(self, name: str, partitions: Iterable[Partition]) -> None:
        """Add each partition that is missing, set the location of one that differs; never touch
        other partitions. Idempotent: registering again changes nothing. `partitions` is streamed
        (a job's may come from its partition list), in requests of at most `REGISTRATION_BATCH`."""
        ...


def register_committed(
    catalog: Catalog,
    store: Store,
    destination: StorePath,
    record: SuccessData,
    partition_values: Callable[[str], tuple[tuple[str, str | None], ...]],
) -> SuccessData:
    """Register the partitions a committed table write wrote, then say so in its record.

    `partition_values` turns a partition path (``dt=2024-01-01``) into its column values (the
    engine's path escaping). A record with nothing pending is returned as it is, so whoever
    finishes the job (the writing driver after its commit or its abort past the commit point, a
    resumed driver) may call this again.
    """
    if not record.registration_pending or record.table is None:
        return record
    registered = InlinePartitions()

    def partitions() -> Iterator[Partition]:
        for path in record.iter_all_partitions(store, destination, str(destination)):
            if path:
                registered.add(path)
                yield Partition(partition_values(path), destination.join(path))

    catalog.register_partitions(record.table, partitions())
    done = replace(
        record, registered_partitions=registered.names, registered_partition_count=registered.count
    )
    save_job_record(store, destination, done)
    log.info("job %s: registered %d partitions of %s", record.job_id, registered.count, record.table)
    return done


def register_table_partitions(
    catalog: Catalog, store: Store, destination: StorePath, record: SuccessData
) -> SuccessData:
    """After the commit: register what a table write wrote (nothing for a path write)."""
    if not record.registration_pending or record.table is None:
        return record
    columns = catalog.table_info(record.table).partition_columns
    return register_committed(
        catalog, store, destination, record, functools.partial(partition_values, columns)
    )


def partition_values(columns: Sequence[str], path: str) -> tuple[tuple[str, str | None], ...]:
    """``col=v/col2=w`` (Spark-escaped directory names) as (column, value) pairs, checked against
    the table's partition columns; Hive's default partition name is None."""
    values = []
    for part, column in zip(path.split("/"), columns, strict=True):
        name, sep, value = part.partition("=")
        if not sep or unescape_path_name(name).lower() != column.lower():
            raise ValueError(
                f"partition directory {path!r} does not match the partition columns {list(columns)}"
            )
        values.append((column, None if value == DEFAULT_PARTITION_NAME else unescape_path_name(value)))
    return tuple(values)


def batched(items: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """`items` in lists of `size` (the last may be shorter), taken as they come: one list in memory."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def partition_name(partition: Partition) -> str:
    """The partition as the metastore names it (``SHOW PARTITIONS``): its Spark-escaped directory path."""
    return partition_path(
        [column for column, _ in partition.values], [value for _, value in partition.values]
    )


def location_path(location: str) -> StorePath:
    """A catalog location (Hadoop's ``file:/x`` form included) as a StorePath."""
    if location.startswith("file:") and not location.startswith("file://"):
        location = "file://" + location[len("file:") :]
    return StorePath.parse(location)


def location_text(path: StorePath) -> str:
    """What the catalog is given: the location taken literally, as Hadoop's ``Path(String)`` takes it."""
    return str(path)


def table_format(name: str, provider: str | None, serde: str | None) -> str:
    """A table's file format: its Spark data source provider (``USING parquet``), else what its
    Hive serde library stores (``STORED AS PARQUET``); ValueError names the table otherwise."""
    provider = (provider or "").lower()
    if provider and provider != "hive":
        return provider
    serde = (serde or "").lower()
    for marker, fmt in _SERDE_FORMATS.items():
        if marker in serde:
            return fmt
    raise ValueError(f"table {name}: cannot tell its file format (provider {provider!r}, serde {serde!r})")
