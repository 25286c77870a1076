"""The Thrift route of `bench.table_registration`: what ``HiveMetastoreCatalog.register_partitions``
costs per partition on a Thrift metastore, the route the committed data source takes (its driver
side has no SparkSession, so it asks the metastore itself).

The metastore is Hive 2.3's own service (``devtools.hive_metastore.HiveMetastoreService``) kept in
a private PostgreSQL (``devtools.postgres.Postgres``), both started once for the scenario and
always stopped. Each repetition creates a fresh external table over Thrift (``create_table``, as
any metastore client may) over a folder already holding its ``dt=...`` directories, then registers
them all; the Thrift calls are counted by wrapping the client the catalog hands to its request, so
the count is whatever the catalog did, by name.

No same-metastore baseline: MSCK REPAIR and the ALTER loop run through a Spark session, and the
bench has one (one JVM per process; Spark builds its Hive client once per JVM, from the conf its
first session had), on an embedded Derby metastore. Pointing Spark at the service would take a
second Spark application, whose startup would dwarf what is measured; these rows stand alone.
"""

from __future__ import annotations

import secrets
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from airflow_commit_provider.core.catalog import Partition, location_path
from airflow_commit_provider.core.hive_metastore_catalog import HiveMetastoreCatalog, thrift_values
from airflow_commit_provider.core.paths import StorePath, same_location
from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
from airflow_commit_provider.devtools.postgres import Postgres, PostgresError
from bench.common import BenchEnv, ScenarioResult, log, timer

METHOD = "ours over Thrift"
DATABASE = "bench_thrift_tables"
#: Hive's classes of a table ``STORED AS PARQUET`` (what Spark's Hive client writes for one).
PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

_T = TypeVar("_T")


def measure(env: BenchEnv, result: ScenarioResult, counts: list[int]) -> None:
    """Time and count `register_partitions` for each of `counts` partitions, `env.repeat` times,
    into `result`; without PostgreSQL, a note says the route was skipped and why."""
    result.parameters[METHOD] = (
        "HiveMetastoreCatalog.register_partitions (the data source's registration) on Hive 2.3's "
        "Thrift metastore kept in PostgreSQL, on loopback"
    )
    try:
        postgres = Postgres()
    except PostgresError as error:
        result.notes.append(f"{METHOD} skipped: {error}")
        log(f"{METHOD} skipped: {error}")
        return
    root = env.work_dir / "thrift-tables"
    with postgres, _metastore(postgres, root) as service:
        catalog = _CountingCatalog(service.uri)
        with _client(service) as client:
            client.create_database(_database(root))
            # The service's first requests load its classes and fill DataNucleus's caches: one
            # registration, not recorded, so the first count measured is no slower for coming first.
            _register(client, catalog, root, 1)
            for count in counts:
                for _turn in range(env.repeat):
                    seconds, calls = _register(client, catalog, root, count)
                    result.measure(f"{METHOD}: seconds per partition, {count} partitions", seconds / count)
                    result.measure(
                        f"{METHOD}: Thrift calls per partition, {count} partitions",
                        calls.total() / count,
                        "calls",
                    )
                    log(f"{count} partitions: {METHOD} {seconds:.3f} s, Thrift calls {dict(calls)}")
                result.notes.append(
                    f"{METHOD}, {count} partitions: Thrift calls in the last registration: "
                    + ", ".join(f"{method} {number}" for method, number in calls.items())
                )
    result.notes.append(
        f"{METHOD} is register_partitions alone, as the Spark route's ours is; after the commit point "
        "register_table_partitions looks the table up first (table_info: one get_table more)."
    )
    result.notes.append(
        f"{METHOD} has no same-metastore baseline: MSCK REPAIR and the ALTER loop need a Spark session "
        "on the Thrift metastore, and the bench's one session (one per JVM) is on embedded Derby."
    )


@contextmanager
def _metastore(postgres: Postgres, root: Path) -> Iterator[HiveMetastoreService]:
    """Hive's Thrift metastore in a new database of the started `postgres`, warehouse under `root`."""
    log("starting Hive's Thrift metastore on PostgreSQL")
    database = postgres.create_database(f"bench_metastore_{secrets.token_hex(4)}")
    with (
        timer() as elapsed,
        HiveMetastoreService(
            database.jdbc_url, database.user, database.password, (root / "warehouse").as_uri()
        ) as service,
    ):
        log(f"Thrift metastore ready in {elapsed():.1f} s at {service.uri}")
        yield service


@contextmanager
def _client(service: HiveMetastoreService) -> Iterator[Any]:
    """A Thrift client of the service for the bench's own setup (not counted)."""
    from pymetastore.metastore import HMS

    assert service.port is not None
    with HMS.create(service.host, service.port) as connection:
        yield connection.client


def _database(root: Path) -> Any:
    from pymetastore.hive_metastore.ttypes import Database

    return Database(name=DATABASE, description="", locationUri=(root / "db").as_uri(), parameters={})


def _register(client: Any, catalog: _CountingCatalog, root: Path, count: int) -> tuple[float, Counter[str]]:
    """A fresh table over `count` partition folders, registered through `catalog`: seconds and its
    Thrift calls by name. Fails unless the metastore then lists every partition at its folder."""
    name = f"events_{uuid.uuid4().hex[:12]}"
    table = f"{DATABASE}.{name}"
    location = root / name
    store_location = StorePath.parse(location.as_uri())
    partitions = []
    for index in range(count):
        day = f"2024-01-01-{index:04d}"
        folder = location / f"dt={day}"
        folder.mkdir(parents=True)
        (folder / "part-00000.parquet").write_bytes(b"PAR1")
        partitions.append(Partition((("dt", day),), store_location.join(f"dt={day}")))
    client.create_table(_external_table(name, location))
    try:
        catalog.calls.clear()
        with timer() as elapsed:
            catalog.register_partitions(table, partitions)
        seconds, calls = elapsed(), Counter(catalog.calls)
        listed = catalog.partitions(table)
        expected = {thrift_values(partition): partition.location for partition in partitions}
        if set(listed) != set(expected) or not all(
            same_location(location_path(listed[values]), where) for values, where in expected.items()
        ):
            raise RuntimeError(f"{METHOD} registered {len(listed)} of {count} partitions of {table} as asked")
        return seconds, calls
    finally:
        client.drop_table(DATABASE, name, False)


def _external_table(name: str, location: Path) -> Any:
    """An external table ``(id BIGINT) PARTITIONED BY (dt STRING) STORED AS PARQUET`` at `location`."""
    from pymetastore.hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    storage = StorageDescriptor(
        cols=[FieldSchema("id", "bigint", "")],
        location=location.as_uri(),
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
        dbName=DATABASE,
        owner="bench",
        sd=storage,
        partitionKeys=[FieldSchema("dt", "string", "")],
        parameters={"EXTERNAL": "TRUE"},
        tableType="EXTERNAL_TABLE",
    )


class _CountingCatalog(HiveMetastoreCatalog):
    """The catalog, counting by name the Thrift calls it makes (each one request and its reply):
    the client its `_request` connects is wrapped before the call gets it."""

    def __init__(self, uris: str) -> None:
        super().__init__(uris)
        self.calls: Counter[str] = Counter()

    def _request(self, name: str, action: str, call: Callable[[Any], _T]) -> _T:
        return super()._request(name, action, lambda client: call(_CountingClient(client, self.calls)))


class _CountingClient:
    """A Thrift client whose method calls add one to `calls[method]`."""

    def __init__(self, client: Any, calls: Counter[str]) -> None:
        self._client = client
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._calls[name] += 1
            return method(*args, **kwargs)

        return counted
