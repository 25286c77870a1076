"""Committed writes into catalog tables (issue 22), on the suite's session with Hive support and its
embedded Derby metastore: location, format and partition columns from the catalog, mismatches
refused before any work, and the partitions written registered after the commit point, also when
registration failed or was cut short and a later driver finishes it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from side_by_side_support import spark_file_output_conf
from spark_support import store_for, visible_files

from airflow_commit_provider.core.catalog import (
    Catalog,
    CatalogUnreachableError,
    Partition,
    TableInfo,
    TableNotFoundError,
    location_path,
)
from airflow_commit_provider.core.escaping import DEFAULT_PARTITION_NAME
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath, same_path
from airflow_commit_provider.spark import applied_conf, write_committed
from airflow_commit_provider.spark.catalog import SparkCatalog
from airflow_commit_provider.spark.tables import finish_table_write, plan_committed_write
from airflow_commit_provider.spark.writer import run_write

pytestmark = pytest.mark.spark

#: Quotes, spaces, `=`, `/`, `%` and unicode (Hive's metastore cannot filter on a value holding
#: both kinds of quote, so each value holds one kind).
ODD_VALUE = "it's a day = 1/2 ü %"
QUOTED_VALUE = 'say "hi"'


def _days(spark: Any, days: list[str], rows_per_day: int = 3) -> Any:
    rows = [
        (index * 100 + row, f"{day}-{row}", day)
        for index, day in enumerate(days)
        for row in range(rows_per_day)
    ]
    return spark.createDataFrame(rows, "id bigint, name string, day string").repartition(2)


def _table_name() -> str:
    return f"default.events_{uuid.uuid4().hex[:10]}"


def _partitions(spark: Any, table: str) -> list[str]:
    return sorted(row[0] for row in spark.sql(f"SHOW PARTITIONS {table}").collect())


def _partition_location(spark: Any, table: str, day: str) -> str:
    literal = day.replace("\\", "\\\\").replace("'", "\\'")
    rows = spark.sql(f"DESCRIBE FORMATTED {table} PARTITION (day = '{literal}')").collect()
    return next(row["data_type"] for row in rows if row["col_name"] == "Location")


def _ids(spark: Any, query: str) -> list[int]:
    return sorted(row["id"] for row in spark.sql(query).collect())


class FailingCatalog:
    """The session's catalog, with registration failing as `error` says (a fault injected at the
    commit point: an unreachable metastore, or the driver killed there)."""

    def __init__(self, spark: Any, error: BaseException):
        self._catalog: Catalog = SparkCatalog(spark)
        self._error = error
        self.attempts = 0

    def table_info(self, name: str) -> TableInfo:
        return self._catalog.table_info(name)

    def register_partitions(self, name: str, partitions: Any) -> None:
        self.attempts += 1
        raise self._error


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def table_place(request: Any, tmp_path: Any) -> tuple[Any, str, dict[str, Any], Any]:
    """(session, an external table location, write options, the store there) on file:// or S3."""
    if request.param == "local":
        return request.getfixturevalue("spark"), f"file://{tmp_path}/events", {}, None
    spark = request.getfixturevalue("s3a_spark")
    location = request.getfixturevalue("s3_prefix").replace("s3://", "s3a://", 1)
    return (
        spark,
        location,
        dict(request.getfixturevalue("s3_options")),
        request.getfixturevalue("spark_s3_store"),
    )


def test_write_by_table_registers_partitions_and_replace_keeps_other_days(table_place: Any) -> None:
    spark, location, options, s3_store = table_place
    table = _table_name()
    store = store_for(StorePath.parse(location), s3_store)

    first = write_committed(
        _days(spark, ["1", "2"]),
        location,
        table=table,
        create_table=True,
        partition_by="day",
        options=options,
    )
    assert _partitions(spark, table) == ["day=1", "day=2"], "two days committed at once are both registered"
    assert _ids(spark, f"SELECT id FROM {table}") == [0, 1, 2, 100, 101, 102]
    pruned = spark.sql(f"SELECT id FROM {table} WHERE day = '2'")
    assert "PartitionFilters: [isnotnull(day" in pruned._jdf.queryExecution().executedPlan().toString()
    assert sorted(row["id"] for row in pruned.collect()) == [100, 101, 102]
    for day in ("1", "2"):
        registered = location_path(_partition_location(spark, table, day))
        assert same_path(registered, StorePath.parse(location).join(f"day={day}"))
    record = load_job_record(store, StorePath.parse(location), first.job_id)
    assert (record.table, record.registered_partitions) == (table, ["day=1", "day=2"])

    before_day1 = {
        name: size
        for name, size in visible_files(store, StorePath.parse(location)).items()
        if name.startswith("day=1/")
    }
    replaced = write_committed(
        _days(spark, ["2", "3"]), table=table, conflict_mode="replace", options=options
    )
    assert _partitions(spark, table) == ["day=1", "day=2", "day=3"]
    assert _ids(spark, f"SELECT id FROM {table} WHERE day = '1'") == [0, 1, 2]
    assert _ids(spark, f"SELECT id FROM {table} WHERE day IN ('2', '3')") == [0, 1, 2, 100, 101, 102]
    after_day1 = {
        name: size
        for name, size in visible_files(store, StorePath.parse(location)).items()
        if name.startswith("day=1/")
    }
    assert after_day1 == before_day1, "replace of days 2 and 3 left day 1 untouched"
    assert load_job_record(store, StorePath.parse(location), replaced.job_id).registered_partitions == [
        "day=2",
        "day=3",
    ]


#: Spark's own dynamic partition overwrite, through its classic commit protocol (on s3a:// too,
#: where the session's default, the S3A magic committer, refuses dynamic overwrite).
SPARK_DYNAMIC_INSERT = {**spark_file_output_conf(), "spark.sql.sources.partitionOverwriteMode": "dynamic"}


def _table_state(spark: Any, store: Any, table: str) -> dict[str, Any]:
    """What a reader of `table` sees, locations relative to the table's: its partitions, their
    locations, the partition directories holding data files, every row, and the null day's rows."""
    root = location_path(spark.sql(f"DESCRIBE FORMATTED {table}").where("col_name = 'Location'").first()[1])
    locations = {}
    for name in _partitions(spark, table):
        rows = spark.sql(f"SHOW TABLE EXTENDED LIKE '{table.split('.')[1]}' PARTITION ({_spec(name)})")
        [location] = [
            line for line in rows.first()["information"].splitlines() if line.startswith("Location:")
        ]
        locations[name] = location_path(location.split(": ", 1)[1]).relative_to(root)
    directories = {
        path.rsplit("/", 1)[0]
        for path in visible_files(store, root)
        if "=" in path and not path.rsplit("/", 1)[1].startswith(("_", "."))
    }
    rows = spark.table(table).collect()
    return {
        "partitions": sorted(locations),
        "locations": locations,
        "directories": sorted(directories),
        "rows": sorted(((r["id"], r["name"], r["day"]) for r in rows), key=repr),
        "null day": _ids(spark, f"SELECT id FROM {table} WHERE day IS NULL"),
    }


def _spec(name: str) -> str:
    """A ``SHOW PARTITIONS`` name as a PARTITION clause (values without escapes or quotes here)."""
    column, value = name.split("=", 1)
    return f"{column} = {'NULL' if value == DEFAULT_PARTITION_NAME else repr(value)}"


# On file:// only: what a null value becomes (its directory, its partition, its rows) does not depend
# on the store, and registering partitions of an s3a:// table is the test above's (the S3 case's four
# writes and their read-backs checked nothing more).
@pytest.mark.parametrize("table_place", ["local"], indirect=True)
def test_null_partition_values_match_sparks_dynamic_insert_into(table_place: Any) -> None:
    """Null and empty partition values (Hive's ``__HIVE_DEFAULT_PARTITION__``) are written,
    registered and read back as Spark's own ``insertInto`` with dynamic overwrite has them, and a
    ``replace`` of the null day leaves the other days."""
    spark, location, options, s3_store = table_place
    store = store_for(StorePath.parse(location), s3_store)
    ours, spark_table = _table_name(), _table_name()
    schema = "id bigint, name string, day string"
    rows = [(1, "a", "1"), (2, "b", None), (3, "c", ""), (4, "d", None), (5, "e", "2")]
    frame = spark.createDataFrame(rows, schema).repartition(2)
    write_committed(
        frame, f"{location}/ours", table=ours, create_table=True, partition_by="day", options=options
    )
    spark.sql(
        f"CREATE TABLE {spark_table} ({schema}) USING parquet PARTITIONED BY (day) LOCATION '{location}/spark'"
    )
    with applied_conf(spark, SPARK_DYNAMIC_INSERT):
        frame.write.insertInto(spark_table, overwrite=True)
    written = _table_state(spark, store, ours)
    assert written == _table_state(spark, store, spark_table)
    assert written["null day"] == [2, 3, 4], "the empty day is the null day"
    assert f"day={DEFAULT_PARTITION_NAME}" in written["partitions"]

    null_day = spark.createDataFrame([(6, "f", None)], schema)
    write_committed(null_day, table=ours, conflict_mode="replace", options=options)
    with applied_conf(spark, SPARK_DYNAMIC_INSERT):
        null_day.write.insertInto(spark_table, overwrite=True)
    replaced = _table_state(spark, store, ours)
    assert replaced == _table_state(spark, store, spark_table)
    assert replaced["rows"] == sorted([(1, "a", "1"), (5, "e", "2"), (6, "f", None)], key=repr)
    assert replaced["partitions"] == written["partitions"], "the other days are kept"


def test_mismatches_are_refused_before_any_work(spark: Any, tmp_path: Any) -> None:
    table = _table_name()
    location = f"file://{tmp_path}/events"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, name string, day string) USING parquet PARTITIONED BY (day) LOCATION '{location}'"
    )
    frame = _days(spark, ["1"])
    cases = [
        (frame.withColumnRenamed("name", "label"), {}, f"column 'label' is not a column of table {table}"),
        (
            frame.selectExpr("CAST(id AS int) AS id", "name", "day"),
            {},
            f"column 'id' is int in the DataFrame but bigint in table {table}",
        ),
        (frame.drop("name"), {}, f"column 'name' of table {table} is missing from the DataFrame"),
        (frame, {"format": "orc"}, f"table {table} is stored as parquet, not format='orc'"),
        (
            frame,
            {"partition_by": "name"},
            rf"table {table} is partitioned by \['day'\], not partition_by=\['name'\]",
        ),
        (frame, {"destination": str(tmp_path / "elsewhere")}, "pass destination or table"),
    ]
    for df, arguments, message in cases:
        with pytest.raises(ValueError, match=message):
            write_committed(df, table=table, **arguments)
    missing = _table_name()
    with pytest.raises(TableNotFoundError, match=f"table {missing} does not exist"):
        write_committed(frame, table=missing)
    assert not (tmp_path / "events").exists() or not any((tmp_path / "events").iterdir()), "nothing written"
    assert _partitions(spark, table) == []


def test_catalog_unreachable_at_commit_then_finish_registers(spark: Any, tmp_path: Any) -> None:
    table, location = _table_name(), f"file://{tmp_path}/events"
    frame = _days(spark, ["1", ODD_VALUE, QUOTED_VALUE])
    plan = plan_committed_write(frame, location, table=table, create_table=True, partition_by="day")
    catalog = FailingCatalog(spark, CatalogUnreachableError("metastore down"))
    with pytest.raises(CatalogUnreachableError, match=f"committed to .*{table} failed.*pending"):
        run_write(frame, plan, catalog=catalog)
    assert catalog.attempts == 1
    assert _partitions(spark, table) == [], "nothing reached the catalog"
    record = load_job_record(store_for(plan.destination, None), plan.destination, plan.job_id)
    assert record.registration_pending and len(record.partitions) == 3

    finished = finish_table_write(spark, table, plan.job_id)
    assert finished is not None and finished.registered_partitions == sorted(record.partitions)
    assert _partitions(spark, table) == ["day=1", "day=it%27s a day %3D 1%2F2 ü %25", "day=say %22hi%22"]
    assert _ids(spark, f"SELECT id FROM {table} WHERE day = 'it\\'s a day = 1/2 ü %'") == [100, 101, 102]
    assert _ids(spark, f"SELECT id FROM {table} WHERE day = 'say \"hi\"'") == [200, 201, 202]
    escaped = "/events/day=it%27s a day %3D 1%2F2 ü %25"
    assert _partition_location(spark, table, ODD_VALUE).endswith(escaped)
    again = finish_table_write(spark, table, plan.job_id)
    assert again is not None and again.registered_partitions == finished.registered_partitions


class DriverKilled(BaseException):
    """What a killed driver looks like to the code it was running."""


def test_killed_between_commit_and_registration_then_retry_finishes(spark: Any, tmp_path: Any) -> None:
    table, location = _table_name(), f"file://{tmp_path}/events"
    frame = _days(spark, ["1", "2"])
    plan = plan_committed_write(frame, location, table=table, create_table=True, partition_by="day")
    with pytest.raises(DriverKilled):
        run_write(frame, plan, catalog=FailingCatalog(spark, DriverKilled()))
    assert _partitions(spark, table) == []

    finished = finish_table_write(spark, table, plan.job_id)
    assert finished is not None and finished.registered_partitions == ["day=1", "day=2"]
    assert _partitions(spark, table) == ["day=1", "day=2"]
    assert _ids(spark, f"SELECT id FROM {table}") == [0, 1, 2, 100, 101, 102]


def test_table_dropped_between_planning_and_commit(spark: Any, tmp_path: Any) -> None:
    table, location = _table_name(), f"file://{tmp_path}/events"
    frame = _days(spark, ["1"])
    plan = plan_committed_write(frame, location, table=table, create_table=True, partition_by="day")
    spark.sql(f"DROP TABLE {table}")
    with pytest.raises(TableNotFoundError, match=f"{table} does not exist"):
        run_write(frame, plan)
    record = load_job_record(store_for(plan.destination, None), plan.destination, plan.job_id)
    assert record.registration_pending, "the data is committed, its registration is pending"

    spark.sql(
        f"CREATE TABLE {table} (id bigint, name string, day string) USING parquet PARTITIONED BY (day) LOCATION '{location}'"
    )
    finish_table_write(spark, table, plan.job_id)
    assert _partitions(spark, table) == ["day=1"]
    assert _ids(spark, f"SELECT id FROM {table}") == [0, 1, 2]


def test_registration_is_idempotent_and_fixes_a_moved_location(spark: Any, tmp_path: Any) -> None:
    table, location = _table_name(), f"file://{tmp_path}/events"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, day string) USING parquet PARTITIONED BY (day) LOCATION '{location}'"
    )
    spark.sql(f"ALTER TABLE {table} ADD PARTITION (day = 'x') LOCATION 'file://{tmp_path}/old'")
    spark.sql(f"ALTER TABLE {table} ADD PARTITION (day = 'y') LOCATION 'file://{tmp_path}/other'")
    catalog = SparkCatalog(spark)
    wanted = [Partition((("day", "x"),), StorePath.parse(f"{location}/day=x"))]
    for _ in range(2):
        catalog.register_partitions(table, wanted)
    assert _partition_location(spark, table, "x").endswith("/events/day=x")
    assert _partition_location(spark, table, "y").endswith("/other"), "other partitions untouched"


class _StatementCounting:
    """The session, counting the ``ALTER TABLE .. ADD`` statements run through it."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self.adds: list[int] = []

    def sql(self, statement: str) -> Any:
        if statement.startswith("ALTER TABLE") and " ADD " in statement:
            self.adds.append(statement.count("PARTITION ("))
        return self._spark.sql(statement)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


def test_registration_adds_in_batches_and_reads_the_partitions_as_it_goes(spark: Any, tmp_path: Any) -> None:
    table, location = _table_name(), f"file://{tmp_path}/events"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, day string) USING parquet PARTITIONED BY (day) LOCATION '{location}'"
    )
    session = _StatementCounting(spark)
    catalog = SparkCatalog(session, batch_size=10)
    days = [f"{n:02d}" for n in range(25)]
    drawn: list[int] = []

    def wanted() -> Any:
        for day in days:
            drawn.append(len(session.adds))  # how many batches were added when this one was drawn
            yield Partition((("day", day),), StorePath.parse(f"{location}/day={day}"))

    catalog.register_partitions(table, wanted())
    assert session.adds == [10, 10, 5]
    assert drawn == [0] * 10 + [1] * 10 + [2] * 5, "a batch is drawn once the one before is added"
    assert _partitions(spark, table) == [f"day={day}" for day in days]
    assert all(_partition_location(spark, table, day).endswith(f"/events/day={day}") for day in days)
