"""`core.catalog.Catalog` over a Hive metastore's Thrift API: no Spark, no JVM.

Production metastores are Thrift services (``hive.metastore.uris=thrift://host:9083``: EMR,
Dataproc, HDP). The committed data source's driver side runs in a Python worker without a
SparkSession, so it cannot use ``spark.catalog`` (``spark.catalog.SparkCatalog``); it asks the
metastore itself through this class. The client is pymetastore's generated Thrift code (the
``[hive]`` extra), whose calls here are those of Hive 2.3 and every later metastore.

Tables as Spark keeps them:

- a Hive-format table (``STORED AS PARQUET``) has its columns in its storage descriptor, its
  format in its serde library and its location in the descriptor's ``location``;
- a Spark data source table (``USING parquet``) has its provider and schema in the table
  parameters ``spark.sql.sources.*`` (the descriptor may hold a placeholder, when Hive cannot read
  the table), and its location in the serde's ``path`` parameter.

Spark writes its schema into the parameters of both kinds, so columns and types come from there
when present (Spark's own names for its types: ``int``, ``bigint``, ``decimal(10,2)``...), else
from the descriptor's Hive types, which spell the simple types alike.

Partitions are registered over one connection, in batches of ``core.catalog.REGISTRATION_BATCH``
(which says what a metastore accepts in one request): per batch, one ``get_partitions_by_names``,
then one ``add_partitions_req`` (if not exists) of those missing and one ``alter_partitions`` of
those whose location differs; values and names are Spark's (``core.escaping``). A missing table
is TableNotFoundError; a metastore that cannot be reached or fails a call is
CatalogUnreachableError; both name the table.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from airflow_commit_provider.core.catalog import (
    REGISTRATION_BATCH,
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
from airflow_commit_provider.core.escaping import DEFAULT_PARTITION_NAME
from airflow_commit_provider.core.paths import same_path

_T = TypeVar("_T")

#: Spark's JSON type names whose simple string differs (``DataType.simpleString``).
_SIMPLE_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "null": "void"}
#: Where Spark keeps the original type of a char/varchar column (``CharVarcharUtils``).
_RAW_TYPE_KEY = "__CHAR_VARCHAR_TYPE_STRING"


def metastore_addresses(uris: str) -> list[tuple[str, int]]:
    """``thrift://host:port[,thrift://host2:port]`` (``hive.metastore.uris``) as (host, port)
    pairs; ValueError names a URI that is not ``thrift://host:port``."""
    addresses = []
    for uri in (part.strip() for part in uris.split(",")):
        parts = urlsplit(uri)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme != "thrift" or not parts.hostname or port is None:
            raise ValueError(f"metastore uri {uri!r} is not thrift://host:port")
        addresses.append((parts.hostname, port))
    return addresses


def split_table_name(name: str) -> tuple[str, str]:
    """``db.table`` (backquotes allowed) as (database, table); a bare table is in ``default``."""
    parts = [part.strip("`") for part in name.split(".")]
    if len(parts) == 1:
        parts.insert(0, "default")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"table name {name!r} is not [database.]table")
    return parts[0].lower(), parts[1].lower()


class HiveMetastoreCatalog:
    """The Hive metastore at `uris` (``hive.metastore.uris``; the first that answers serves), one
    connection per request; each Thrift call waits at most `timeout_seconds`, and carries at most
    `batch_size` partitions."""

    def __init__(
        self, uris: str, *, timeout_seconds: float = 60.0, batch_size: int = REGISTRATION_BATCH
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.uris = uris
        self._addresses = metastore_addresses(uris)
        self._timeout_ms = int(timeout_seconds * 1000)
        self._batch_size = batch_size

    def __repr__(self) -> str:
        return f"HiveMetastoreCatalog({self.uris!r})"

    def table_info(self, name: str) -> TableInfo:
        database, table_name = split_table_name(name)
        table = self._request(
            name, f"look up table {name}", lambda client: client.get_table(database, table_name)
        )
        return describe_table(name, table)

    def register_partitions(self, name: str, partitions: Iterable[Partition]) -> None:
        """Register `partitions` batch by batch (one batch in memory): add those missing
        (``ifNotExists``: a concurrent add is no error), then set the location of each existing one
        that differs. A failure names how many partitions were registered before it; those stay
        registered, and registering again finishes the rest."""
        database, table_name = split_table_name(name)
        batches = batched(partitions, self._batch_size)
        first = next(batches, None)
        if first is None:
            return
        done = 0

        def register(client: Any) -> None:
            nonlocal done
            table = client.get_table(database, table_name)
            for batch in itertools.chain([first], batches):
                _register_batch(client, table, batch)
                done += len(batch)

        self._request(name, lambda: f"register the partitions of {name} ({done:,} done)", register)

    def partitions(self, name: str) -> dict[tuple[str, ...], str]:
        """Every partition of the table: its values (Hive's default partition name for null) and
        its location, as the metastore has them."""
        database, table_name = split_table_name(name)
        found = self._request(
            name,
            f"list the partitions of {name}",
            lambda client: client.get_partitions(database, table_name, -1),
        )
        return {tuple(partition.values): partition.sd.location for partition in found}

    def _request(self, name: str, action: str | Callable[[], str], call: Callable[[Any], _T]) -> _T:
        """`call` with a connected client; Thrift's errors as ours, in one line naming the table
        and the action (a callable gives it as it stands when the error happens)."""
        from pymetastore.hive_metastore.ThriftHiveMetastore import Client
        from pymetastore.hive_metastore.ttypes import NoSuchObjectException
        from thrift.protocol.TBinaryProtocol import TBinaryProtocol
        from thrift.Thrift import TException

        def described() -> str:
            return action() if callable(action) else action

        try:
            transport = self._connect()
        except (TException, OSError) as error:
            raise CatalogUnreachableError(
                f"cannot {described()}: metastore {self.uris}: {_one_line(error)}"
            ) from error
        try:
            return call(Client(TBinaryProtocol(transport)))
        except NoSuchObjectException as error:
            raise TableNotFoundError(
                f"table {name} does not exist (metastore {self.uris}: {error.message})"
            ) from None
        except (TException, OSError) as error:
            raise CatalogUnreachableError(
                f"cannot {described()}: metastore {self.uris}: {_one_line(error)}"
            ) from error
        finally:
            transport.close()

    def _connect(self) -> Any:
        """An open transport to the first metastore that accepts a connection."""
        from thrift.transport import TSocket, TTransport

        last_error: Exception | None = None
        for host, port in self._addresses:
            socket = TSocket.TSocket(host, port)
            socket.setTimeout(self._timeout_ms)
            transport = TTransport.TBufferedTransport(socket)
            try:
                transport.open()
                return transport
            except TTransport.TTransportException as error:
                last_error = error
        assert last_error is not None
        raise last_error


def _register_batch(client: Any, table: Any, batch: list[Partition]) -> None:
    """One batch: one ``get_partitions_by_names``, then at most one ``add_partitions_req`` and one
    ``alter_partitions``. A partition named twice in the batch is added once (the metastore
    refuses a request naming one twice)."""
    from pymetastore.hive_metastore.ttypes import AddPartitionsRequest

    wanted = {thrift_values(partition): partition for partition in batch}
    names = [partition_name(partition) for partition in wanted.values()]
    existing = {
        tuple(found.values): found
        for found in client.get_partitions_by_names(table.dbName, table.tableName, names)
    }
    missing, moved = [], []
    for values, partition in wanted.items():
        found = existing.get(values)
        if found is None:
            missing.append(_new_partition(table, partition))
        elif not same_path(location_path(found.sd.location or ""), partition.location):
            found.sd.location = location_text(partition.location)
            moved.append(found)
    if missing:
        request = AddPartitionsRequest(
            table.dbName, table.tableName, missing, ifNotExists=True, needResult=False
        )
        client.add_partitions_req(request)
    if moved:
        client.alter_partitions(table.dbName, table.tableName, moved)


def _one_line(error: BaseException) -> str:
    """A Thrift error in one line (its ``message``, which generated exceptions carry)."""
    detail = getattr(error, "message", None) or str(error) or ""
    return f"{type(error).__name__}: {detail.splitlines()[0] if detail else ''}"


def describe_table(name: str, table: Any) -> TableInfo:
    """A Thrift ``Table`` as a TableInfo (module docstring: both kinds of table)."""
    parameters = table.parameters or {}
    serde = table.sd.serdeInfo
    provider = parameters.get("spark.sql.sources.provider")
    location = table.sd.location or ""
    if provider and provider.lower() != "hive":
        location = (serde.parameters or {}).get("path") or location
    if not location:
        raise ValueError(f"table {name} has no location in the metastore")
    schema = _spark_schema(parameters)
    if schema is not None:
        columns = tuple((field["name"], _field_type(field)) for field in schema["fields"])
        count = int(parameters.get("spark.sql.sources.schema.numPartCols", "0"))
        partition_columns = tuple(parameters[f"spark.sql.sources.schema.partCol.{i}"] for i in range(count))
    else:
        columns = tuple(
            (column.name, column.type.lower()) for column in [*table.sd.cols, *table.partitionKeys]
        )
        partition_columns = tuple(column.name for column in table.partitionKeys)
    return TableInfo(
        name=name,
        location=location_path(location),
        format=table_format(name, provider, serde.serializationLib),
        partition_columns=partition_columns,
        columns=columns,
    )


def thrift_values(partition: Partition) -> tuple[str, ...]:
    """The partition's values as the metastore keeps them (null as Hive's default partition)."""
    return tuple(DEFAULT_PARTITION_NAME if value is None else value for _, value in partition.values)


def _new_partition(table: Any, partition: Partition) -> Any:
    """A partition of `table` at its location, stored as the table is (what Spark's client adds)."""
    from pymetastore.hive_metastore.ttypes import Partition as ThriftPartition

    storage = copy.deepcopy(table.sd)
    storage.location = location_text(partition.location)
    return ThriftPartition(
        values=list(thrift_values(partition)),
        dbName=table.dbName,
        tableName=table.tableName,
        sd=storage,
        parameters={},
    )


def _spark_schema(parameters: dict[str, str]) -> dict[str, Any] | None:
    """The schema Spark keeps in the table's parameters, whole or split into parts."""
    text = parameters.get("spark.sql.sources.schema")
    if text is None and "spark.sql.sources.schema.numParts" in parameters:
        count = int(parameters["spark.sql.sources.schema.numParts"])
        text = "".join(parameters[f"spark.sql.sources.schema.part.{i}"] for i in range(count))
    return None if text is None else dict(json.loads(text))


def _field_type(field: dict[str, Any]) -> str:
    """A schema field's type as Spark's catalog lists it: a char/varchar column's declared type."""
    raw = (field.get("metadata") or {}).get(_RAW_TYPE_KEY)
    return str(raw) if raw else simple_type(field["type"])


def simple_type(json_type: Any) -> str:
    """A Spark schema JSON type as ``DataType.simpleString`` spells it."""
    if isinstance(json_type, str):
        return _SIMPLE_NAMES.get(json_type, json_type)
    kind = json_type["type"]
    if kind == "array":
        return f"array<{simple_type(json_type['elementType'])}>"
    if kind == "map":
        return f"map<{simple_type(json_type['keyType'])},{simple_type(json_type['valueType'])}>"
    if kind == "struct":
        return (
            "struct<" + ",".join(f"{f['name']}:{simple_type(f['type'])}" for f in json_type["fields"]) + ">"
        )
    if kind == "udt":
        return simple_type(json_type["sqlType"])
    raise ValueError(f"unknown Spark type in a table schema: {json_type!r}")
