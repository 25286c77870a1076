"""What the tests and benchmarks of catalog registration share on a Thrift metastore
(``devtools.hive_metastore.HiveMetastoreService``): a client for their own setup, an external
Parquet table made over Thrift (as any metastore client may make one), and a catalog that counts
the Thrift calls it makes by name, so a test or a bench row says what registration asked of the
metastore, not how long it took alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from airflow_commit_provider.core.hive_metastore_catalog import HiveMetastoreCatalog

#: Hive's classes of a table ``STORED AS PARQUET`` (what Spark's Hive client writes for one).
PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

_T = TypeVar("_T")


@contextmanager
def metastore_client(host: str, port: int) -> Iterator[Any]:
    """A Thrift client of the metastore at `host`:`port`, for setup that is not measured."""
    from pymetastore.metastore import HMS

    with HMS.create(host, port) as connection:
        yield connection.client


def database(name: str, location: str) -> Any:
    """A Thrift ``Database`` named `name` whose tables go under `location` (a URI)."""
    from pymetastore.hive_metastore.ttypes import Database

    return Database(name=name, description="", locationUri=location, parameters={})


def external_parquet_table(
    database_name: str,
    name: str,
    location: str,
    *,
    columns: Sequence[tuple[str, str]] = (("id", "bigint"),),
    partition_columns: Sequence[str] = ("dt",),
) -> Any:
    """A Thrift ``Table``: external, ``STORED AS PARQUET`` at `location` (a URI), with `columns`
    (name, Hive type) and string `partition_columns`."""
    from pymetastore.hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    storage = StorageDescriptor(
        cols=[FieldSchema(column, kind, "") for column, kind in columns],
        location=location,
        inputFormat=PARQUET_INPUT,
        outputFormat=PARQUET_OUTPUT,
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(serializationLib=PARQUET_SERDE, parameters={}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return Table(
        tableName=name,
        dbName=database_name,
        owner="airflow-commit",
        sd=storage,
        partitionKeys=[FieldSchema(column, "string", "") for column in partition_columns],
        parameters={"EXTERNAL": "TRUE"},
        tableType="EXTERNAL_TABLE",
    )


class CountingMetastoreCatalog(HiveMetastoreCatalog):
    """The Thrift catalog, counting by name the calls it makes (each one request and its reply),
    with the partitions each call carried: the client its `_request` connects is wrapped before the
    call gets it, so the counts are whatever the catalog did."""

    def __init__(self, uris: str, **options: Any) -> None:
        super().__init__(uris, **options)
        self.calls: Counter[str] = Counter()
        self.largest: Counter[str] = Counter()
        """Per call name, the most partitions one call carried (sent or asked for by name)."""

    def clear(self) -> None:
        self.calls.clear()
        self.largest.clear()

    def _request(self, name: str, action: str | Callable[[], str], call: Callable[[Any], _T]) -> _T:
        return super()._request(name, action, lambda client: call(_CountingClient(client, self)))


class _CountingClient:
    """A Thrift client whose method calls are counted by `catalog`."""

    def __init__(self, client: Any, catalog: CountingMetastoreCatalog) -> None:
        self._client = client
        self._catalog = catalog

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._catalog.calls[name] += 1
            carried = _partitions_carried(args)
            self._catalog.largest[name] = max(self._catalog.largest[name], carried)
            return method(*args, **kwargs)

        return counted


def _partitions_carried(args: Sequence[Any]) -> int:
    """How many partitions (or partition names) a call's arguments hold."""
    for argument in args:
        parts = getattr(argument, "parts", None)  # AddPartitionsRequest
        if isinstance(parts, list):
            return len(parts)
        if isinstance(argument, list):
            return len(argument)
    return 0
