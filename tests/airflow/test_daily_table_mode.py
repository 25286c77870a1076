"""The daily example's table mode end to end: Airflow's dag.test(), real spark-submit applications,
one Hive metastore service (Thrift, kept in PostgreSQL) that all of them share.

Day 1 is written, then day 2, then day 1 again, each by its own Spark application: after each
commit the day's partition is in the shared metastore at the day's directory, and the job record
says it was registered (what the sensor waits for in table mode). The report of day 2 reads the
table, which then holds both days, through SQL with the ``dt`` filter, and gets exactly day 2's
rows; the report of the re-run day 1 gets one copy of it, the re-run's. Five spark-submits: three
writes and the two reports that prove the filter and the replacement (day 1's first report run is
made but not run).

The table is on ``file://``: Hive's metastore service resolves every table and partition location
through Hadoop's filesystem, and PySpark's jars it runs on have no ``s3a://`` one.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from dag_runs import create_asset_triggered_runs, run_daily_ingest, run_daily_report, task_instances, xcom

from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath, same_path
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
from airflow_commit_provider.spark.catalog import location_path

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY_1, DAY_2 = datetime(2024, 1, 1, tzinfo=timezone.utc), datetime(2024, 1, 2, tzinfo=timezone.utc)


@pytest.fixture
def table_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, metastore_service: HiveMetastoreService
) -> tuple[str, StorePath]:
    """The example DAGs in table mode on a file:// root: (the catalog table, its location)."""
    table = f"daily_{uuid.uuid4().hex[:8]}.events"  # the metastore is the session's: a database of its own
    root = (tmp_path / "root").as_uri()
    monkeypatch.setenv("DAILY_INGEST_ROOT", root)
    monkeypatch.setenv("DAILY_INGEST_TABLE", table)
    monkeypatch.setenv("DAILY_INGEST_METASTORE_URI", metastore_service.uri)
    return table, StorePath.parse(f"{root}/warehouse/events")


def metastore_partitions(service: HiveMetastoreService, table: str) -> dict[str, StorePath]:
    """dt -> location of each partition, as the shared metastore lists them (over Thrift, no Spark)."""
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    database, name = table.split(".")
    transport = TTransport.TBufferedTransport(TSocket.TSocket(service.host, service.port))
    transport.open()
    try:
        partitions = ThriftHiveMetastore.Client(TBinaryProtocol(transport)).get_partitions(database, name, -1)
    finally:
        transport.close()
    return {partition.values[0]: location_path(partition.sd.location) for partition in partitions}


def write_day(day: datetime, location: StorePath) -> dict[str, Any]:
    """One run of the ingest DAG in table mode: every task succeeded, the day was written whole, and
    its record says the day is registered (what the sensor waited for). The writer's XCom."""
    run = run_daily_ingest(day)
    tis = task_instances(run)
    assert {t: ti.state for t, ti in tis.items()} == dict.fromkeys(tis, "success")
    written, landed = xcom(run, "write_partition"), xcom(run, "land_source_data")
    partition = f"dt={day:%Y-%m-%d}"
    assert (written["partitions"], written["rows"]) == ([partition], landed["rows"])
    assert xcom(run, "wait_for_success")["job_id"] == written["job_id"]
    record = load_job_record(LocalStore(), location, written["job_id"])
    assert record.registered_partitions == [partition], "the sensor passed once the day was registered"
    return dict(written)


def test_days_are_registered_in_the_shared_metastore_and_reported_from_the_table(
    airflow_db: Any,
    spark_default: None,
    metastore_service: HiveMetastoreService,
    table_mode: tuple[str, StorePath],
) -> None:
    table, location = table_mode

    first = write_day(DAY_1, location)
    registered = metastore_partitions(metastore_service, table)
    assert list(registered) == ["2024-01-01"]
    assert same_path(registered["2024-01-01"], location.join("dt=2024-01-01"))
    assert len(create_asset_triggered_runs("daily_events_report")) == 1, "day 1's report run is made"

    second = write_day(DAY_2, location)
    registered = metastore_partitions(metastore_service, table)
    assert sorted(registered) == ["2024-01-01", "2024-01-02"]
    assert same_path(registered["2024-01-02"], location.join("dt=2024-01-02"))
    report = run_daily_report(second, "2024-01-02")
    assert (report["rows"], report["files"]) == (second["rows"], second["files"]), (
        "the table holds two days; the report read exactly day 2's rows"
    )
    assert second["rows"] != first["rows"]

    again = write_day(DAY_1, location)
    assert again["job_id"] != first["job_id"]
    assert metastore_partitions(metastore_service, table) == registered, "day 1 kept its place"
    report = run_daily_report(again, "2024-01-01")
    assert (report["rows"], report["files"]) == (first["rows"], again["files"]), "one copy of day 1"
    day_1 = [s.path.name for s in LocalStore().list_files(location.join("dt=2024-01-01"))]
    data = [name for name in day_1 if name != "_SUCCESS"]
    assert data and all(again["job_id"] in name for name in data), "every file of day 1 is the re-run's"
