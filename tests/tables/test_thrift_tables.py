"""Catalog tables through a Thrift Hive metastore (issue 22): the suite's metastore service
(``support.metastore_service``), one Spark application connected to it (a Spark Connect server,
so this process keeps its own classic session), and ``df.write.format("committed")
.option("table", ...)``, whose driver side has no session and asks the metastore over Thrift
(``core.hive_metastore_catalog``).

- The Thrift catalog describes both kinds of table Spark creates (Hive format, data source) as the
  session's own catalog does.
- The data source writes a partitioned table on ``file://`` and on the embedded S3 (``s3a://``):
  two days, then a replace of one; Spark reads the table back (``spark.table``, and ``spark.sql``
  with a partition filter); the metastore holds exactly the days written, at their directories.
- A write that does not fit its table is refused in one line before anything is written.
- With the metastore gone at the commit point, or the table dropped there, the data is committed,
  the record says registration is pending, and ``finish_table_write`` over the Thrift catalog
  finishes it (once the table is back).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.tcp_relay import TcpRelay

from airflow_commit_provider.core.catalog import CatalogUnreachableError, TableNotFoundError, location_path
from airflow_commit_provider.core.hive_metastore_catalog import HiveMetastoreCatalog
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath, same_path
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.hadoop_peers]

DATABASE = "thrift_tables"
#: A partition value with characters Spark escapes in directory names.
ODD_DAY = "2024-01-03 a/b=c"


@pytest.fixture(scope="module")
def app(
    metastore_service: HiveMetastoreService, embedded_s3: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The module's one Spark application: a Spark Connect server whose catalog is the metastore
    service and whose S3A reaches the embedded S3 (credentials from its environment)."""
    from pyspark.sql import SparkSession
    from support.connect import ConnectServer

    from airflow_commit_provider.core.store.settings import S3Settings
    from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf
    from airflow_commit_provider.spark import register_data_source
    from airflow_commit_provider.spark.jvm_committers import s3a_store_conf

    server = ConnectServer()
    server.confs.update(metastore_service.spark_conf())
    server.confs.update(peer_spark_conf(peer_jars(), tmp_path_factory.mktemp("hadoop-local")))
    s3 = S3Settings(endpoint_url=embedded_s3.endpoint_url, region_name=embedded_s3.region)
    server.confs.update(s3a_store_conf(s3))
    saved = dict(os.environ)
    os.environ.update(embedded_s3.env())  # the server's: S3A's and our store's credentials
    try:
        server.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        session = SparkSession.builder.remote(server.url).create()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # this process's classic session stays classic
        register_data_source(session)
        session.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        yield session
        session.stop()
    finally:
        server.stop()


@pytest.fixture
def catalog(metastore_service: HiveMetastoreService) -> HiveMetastoreCatalog:
    return HiveMetastoreCatalog(metastore_service.uri)


def _table(app: Any, location: str, *, kind: str = "datasource") -> str:
    """A new partitioned table (id bigint, name string, dt string) at `location`."""
    return _table_at(app, f"{DATABASE}.events_{uuid.uuid4().hex[:8]}", location, kind=kind)


def _table_at(app: Any, name: str, location: str, *, kind: str = "datasource") -> str:
    if kind == "hive":
        app.sql(
            f"CREATE TABLE {name} (id BIGINT, name STRING) PARTITIONED BY (dt STRING) "
            f"STORED AS PARQUET LOCATION '{location}'"
        )
    else:
        app.sql(
            f"CREATE TABLE {name} (id BIGINT, name STRING, dt STRING) USING parquet "
            f"PARTITIONED BY (dt) LOCATION '{location}'"
        )
    return name


def _drop_external(port: int | None, table: str) -> None:
    """Drop the table behind Spark's back, its files kept, as another client of the metastore would."""
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    assert port is not None
    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
    transport.open()
    try:
        database, name = table.split(".")
        ThriftHiveMetastore.Client(TBinaryProtocol(transport)).drop_table(database, name, False)
    finally:
        transport.close()


def _days(app: Any, days: list[str], tag: str) -> Any:
    rows = [(index * 10 + row, f"{tag}-{row}", day) for index, day in enumerate(days) for row in range(3)]
    return app.createDataFrame(rows, "id bigint, name string, dt string").repartition(2)


def _write(frame: Any, table: str, job_id: str, mode: str, **options: str) -> None:
    writer = frame.write.format("committed").mode(mode).option("table", table).option("job_id", job_id)
    writer.options(**options).save()


def _write_day_through(relay: TcpRelay, app: Any, table: str, job_id: str, tag: str) -> None:
    """Append three rows of 2024-01-01, the metastore reached through `relay`."""
    frame = _days(app, ["2024-01-01"], tag)
    _write(frame, table, job_id, "append", metastore_uri=f"thrift://127.0.0.1:{relay.port}")


def _rows(app: Any, query: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in app.sql(query).collect())


def _files(location: StorePath) -> list[str]:
    """The data files under a local table's location."""
    store = open_store(location)
    try:
        return sorted(
            item.path.key for item in store.list_files(location) if item.path.key.endswith(".parquet")
        )
    finally:
        store.close()


def _record(location: StorePath, job_id: str, embedded_s3: Any = None) -> Any:
    store = embedded_s3.store() if location.scheme != "file" else open_store(location)
    try:
        return load_job_record(store, location, job_id)
    finally:
        store.close()


def test_thrift_catalog_describes_both_kinds_of_table_as_spark_does(
    app: Any, catalog: HiveMetastoreCatalog, tmp_path: Path
) -> None:
    """Hive format (columns in the storage descriptor, format in the serde) and data source
    (provider and schema in ``spark.sql.sources.*``, location in the serde's ``path``)."""
    from airflow_commit_provider.spark.catalog import SparkCatalog

    hive = f"{DATABASE}.hive_{uuid.uuid4().hex[:8]}"
    app.sql(
        f"CREATE TABLE {hive} (id BIGINT, amount DECIMAL(10,2), tags MAP<STRING,INT>) "
        "PARTITIONED BY (dt STRING, hour INT) STORED AS ORC"
    )
    source = f"{DATABASE}.source_{uuid.uuid4().hex[:8]}"
    app.sql(
        f"CREATE TABLE {source} (id BIGINT, at TIMESTAMP, point STRUCT<x: DOUBLE, y: DOUBLE>, day DATE) "
        f"USING parquet PARTITIONED BY (day) LOCATION '{tmp_path.as_uri()}/source'"
    )
    for name, fmt, partitions in ((hive, "orc", ("dt", "hour")), (source, "parquet", ("day",))):
        thrift = catalog.table_info(name)
        assert thrift == SparkCatalog(app).table_info(name)
        assert (thrift.format, thrift.partition_columns) == (fmt, partitions)
    assert same_path(catalog.table_info(source).location, StorePath.parse(f"{tmp_path.as_uri()}/source"))
    assert dict(catalog.table_info(source).columns)["point"] == "struct<x:double,y:double>"
    with pytest.raises(TableNotFoundError, match=rf"^table {DATABASE}.missing does not exist") as missing:
        catalog.table_info(f"{DATABASE}.missing")
    assert "\n" not in str(missing.value)
    with TcpRelay(("127.0.0.1", 1), connections=0) as closed:
        gone = HiveMetastoreCatalog(f"thrift://127.0.0.1:{closed.port}", timeout_seconds=5)
    with pytest.raises(CatalogUnreachableError, match=rf"^cannot look up table {hive}: metastore thrift://"):
        gone.table_info(hive)


@pytest.mark.parametrize("where", ["file", pytest.param("s3", marks=pytest.mark.s3)])
def test_data_source_writes_two_days_then_replaces_one(
    app: Any, catalog: HiveMetastoreCatalog, embedded_s3: Any, tmp_path: Path, where: str
) -> None:
    if where == "s3":
        bucket = embedded_s3.create_bucket(f"thrift-{uuid.uuid4().hex[:12]}")
        location = f"s3a://{bucket}/events"
    else:
        location = f"{tmp_path.as_uri()}/events"
    table = _table(app, location, kind="hive" if where == "file" else "datasource")
    first, second = f"first-{uuid.uuid4().hex[:8]}", f"second-{uuid.uuid4().hex[:8]}"
    _write(_days(app, ["2024-01-01", ODD_DAY], "a"), table, first, "append")
    _write(_days(app, ["2024-01-01"], "b"), table, second, "overwrite")

    assert _rows(app, f"SELECT dt, name FROM {table}") == sorted(
        [("2024-01-01", f"b-{row}") for row in range(3)] + [(ODD_DAY, f"a-{row}") for row in range(3)]
    )
    query = f"SELECT id FROM {table} WHERE dt = '{ODD_DAY}'"
    plan = app.sql(f"EXPLAIN {query}").collect()[0][0]
    assert re.search(r"PartitionFilters: \[[^\]]*\bdt#", plan), plan  # pruned by the metastore's partitions
    assert _rows(app, query) == [(10,), (11,), (12,)]
    assert app.table(table).count() == 6

    root = location_path(location)
    registered = catalog.partitions(table)
    assert set(registered) == {("2024-01-01",), (ODD_DAY,)}
    assert same_path(location_path(registered[(ODD_DAY,)]), root.join("dt=2024-01-03 a%2Fb%3Dc"))
    assert same_path(location_path(registered[("2024-01-01",)]), root.join("dt=2024-01-01"))
    record = _record(root, second, embedded_s3)
    assert (record.table, record.registered_partitions) == (table, ["dt=2024-01-01"])
    assert _record(root, first, embedded_s3).registered_partitions == [
        "dt=2024-01-01",
        "dt=2024-01-03 a%2Fb%3Dc",
    ]


def test_a_write_that_does_not_fit_its_table_is_refused_before_any_work(
    app: Any, metastore_service: HiveMetastoreService, tmp_path: Path
) -> None:
    from airflow_commit_provider.spark.datasource import plan_source_write

    location = f"{tmp_path.as_uri()}/events"
    table = _table(app, location)
    frame = _days(app, ["2024-01-01"], "x")
    uri = {"metastore_uri": metastore_service.uri}
    cases = [
        (
            {"table": table, **uri},
            frame.withColumnRenamed("name", "label"),
            f"column 'label' is not a column of table {table}",
        ),
        (
            {"table": table, **uri},
            frame.selectExpr("cast(id as int) id", "name", "dt"),
            "column 'id' is int in the DataFrame but bigint",
        ),
        (
            {"table": table, "partition_by": "name", **uri},
            frame,
            rf"table {table} is partitioned by \['dt'\], not partition_by=\['name'\]",
        ),
        (
            {"table": table, "format": "orc", **uri},
            frame,
            f"table {table} is stored as parquet, not format='orc'",
        ),
        ({"table": f"{DATABASE}.nope", **uri}, frame, f"table {DATABASE}.nope does not exist"),
        ({"table": table, "path": location, **uri}, frame, "pass save\\(path\\) or option\\('table'"),
        ({"table": table}, frame, "through a Thrift metastore: pass option\\('metastore_uri'"),
    ]
    for options, written, message in cases:
        with pytest.raises(ValueError, match=rf"^data source 'committed'.*{message}") as refused:
            plan_source_write(options, written.schema, False)
        assert "\n" not in str(refused.value)
    # Through Spark's write path too: the error reaches the caller, and nothing was written.
    with pytest.raises(Exception, match="column 'label' is not a column of table"):
        _write(frame.withColumnRenamed("name", "label"), table, f"refused-{uuid.uuid4().hex[:8]}", "append")
    assert not [path for path in tmp_path.rglob("*") if path.is_file()]


def test_metastore_gone_at_the_commit_point_leaves_registration_pending_until_finished(
    app: Any, catalog: HiveMetastoreCatalog, metastore_service: HiveMetastoreService, tmp_path: Path
) -> None:
    from airflow_commit_provider.spark.tables import finish_table_write

    location = f"{tmp_path.as_uri()}/events"
    table = _table(app, location)
    job_id = f"gone-{uuid.uuid4().hex[:8]}"
    assert metastore_service.port is not None
    # Planning asks the metastore once (the table); the commit point's registration finds it gone.
    with TcpRelay(("127.0.0.1", metastore_service.port), connections=1) as relay:
        with pytest.raises(Exception, match="registration is pending") as failed:
            _write_day_through(relay, app, table, job_id, "g")
    assert "finish_table_write" in str(failed.value)
    root = location_path(location)
    assert len(_files(root)) >= 1  # committed
    assert _record(root, job_id).registration_pending
    assert catalog.partitions(table) == {}

    finished = finish_table_write(None, table, job_id, catalog=catalog)
    assert finished is not None and finished.registered_partitions == ["dt=2024-01-01"]
    assert _record(root, job_id).registered_partitions == ["dt=2024-01-01"]
    assert set(catalog.partitions(table)) == {("2024-01-01",)}
    assert len(_rows(app, f"SELECT * FROM {table} WHERE dt = '2024-01-01'")) == 3
    again = finish_table_write(None, table, job_id, catalog=catalog)  # finishing again changes nothing
    assert again is not None and again.registered_partitions == ["dt=2024-01-01"]


def test_table_dropped_at_the_commit_point_leaves_registration_pending(
    app: Any, catalog: HiveMetastoreCatalog, metastore_service: HiveMetastoreService, tmp_path: Path
) -> None:
    """The write's second metastore connection is its first after the commit point: the table is
    dropped (its files kept: external) just before it is relayed."""
    from airflow_commit_provider.spark.tables import finish_table_write

    location = f"{tmp_path.as_uri()}/events"
    table = _table(app, location)
    job_id = f"dropped-{uuid.uuid4().hex[:8]}"
    assert metastore_service.port is not None

    def drop_at_commit(connection: int) -> None:
        if connection == 2:
            _drop_external(metastore_service.port, table)

    relay = TcpRelay(("127.0.0.1", metastore_service.port), connections=3, before_relaying=drop_at_commit)
    with (
        relay,
        pytest.raises(
            Exception, match=rf"registering its partitions in {table} failed \(table {table} does not exist"
        ),
    ):
        _write_day_through(relay, app, table, job_id, "d")
    root = location_path(location)
    assert _files(root)
    assert _record(root, job_id).registration_pending
    with pytest.raises(TableNotFoundError):
        finish_table_write(None, table, job_id, catalog=catalog)
    assert _record(root, job_id).registration_pending

    _table_at(app, table, location)
    finished = finish_table_write(None, table, job_id, catalog=catalog)
    assert finished is not None and finished.registered_partitions == ["dt=2024-01-01"]
    assert _rows(app, f"SELECT name FROM {table} WHERE dt = '2024-01-01'") == [("d-0",), ("d-1",), ("d-2",)]
