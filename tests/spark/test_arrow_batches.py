"""The Arrow batches that carry a write's rows to its Python tasks: bounded in bytes whatever the
rows, and unmeasured by Spark where the schema bounds them (``spark.arrow_batches``).

Every batch a task receives is logged from inside the task (rows, bytes, and the job's byte limit
as the task sees it in its local properties), through ``write_committed``'s task instrumentation or
a data source whose tasks log what Spark hands them. The suite's session cuts batches at 50 rows;
the tests about Spark's own limits unset that for their write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_hooks import BatchLog, ObservedSelect, instrumented_write, observed_data_source
from spark_support import visible_files
from support.invariants import assert_nothing_left_behind

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import (
    arrow_batches,
    register_data_source,
    source_batches,
    write_committed,
)
from airflow_commit_provider.spark.config import (
    ARROW_MAX_BYTES_PER_BATCH,
    ARROW_MAX_RECORDS_PER_BATCH,
    ARROW_UNMEASURED_BATCHES,
)
from airflow_commit_provider.spark.instrumentation import TaskInstrumentation, WriteInstrumentation
from airflow_commit_provider.spark.session_conf import applied_conf

pytestmark = pytest.mark.spark

#: The wide rows' payload: 1 MiB of text each.
WIDE_ROW_BYTES = 1024**2
#: Wide rows per write, all in one task: 80 MiB, more than Spark's 64 MiB per batch, so Spark must
#: cut the task's rows into batches. (Two such tasks, 160 MiB a write, checked nothing more.)
WIDE_ROWS = 80


@pytest.fixture
def spark_row_limit_unset(spark: Any) -> Iterator[Any]:
    """The suite's session with Spark's own row limit (10,000) instead of the suite's 50 rows."""
    suite_value = spark.conf.get(ARROW_MAX_RECORDS_PER_BATCH, None)
    spark.conf.unset(ARROW_MAX_RECORDS_PER_BATCH)
    try:
        yield spark
    finally:
        if suite_value is not None:
            spark.conf.set(ARROW_MAX_RECORDS_PER_BATCH, suite_value)


@pytest.fixture
def batch_log(tmp_path: Path) -> BatchLog:
    directory = tmp_path / "batches"
    directory.mkdir()
    return BatchLog(str(directory))


def _numeric_df(spark: Any, rows: int) -> Any:
    """Fixed-width columns only: numbers, a boolean, a date."""
    return spark.range(rows, numPartitions=2).selectExpr(
        "id",
        "id * 0.5 AS half",
        "CAST(id % 7 AS INT) AS k",
        "id % 2 = 0 AS even",
        "date_add(DATE'2024-01-01', CAST(id % 30 AS INT)) AS day",
    )


def _wide_df(spark: Any, rows: int = WIDE_ROWS) -> Any:
    """Rows of about 1 MiB, in one task: an id and a 1 MiB string."""
    return spark.range(rows, numPartitions=1).selectExpr(
        "id", f"repeat(CAST(id % 10 AS STRING), {WIDE_ROW_BYTES}) AS payload"
    )


def _logged_write(df: Any, path: Path, batch_log: BatchLog, **arguments: Any) -> list[dict[str, Any]]:
    """``write_committed`` of `df` to `path`; the non-empty batches its tasks received."""
    instrumentation = WriteInstrumentation(task=TaskInstrumentation(received_batch=batch_log))
    summary = instrumented_write(df, str(path), instrumentation, format="parquet", **arguments)
    assert summary.rows == df.count()
    return [entry for entry in batch_log.read() if entry["rows"]]


def _same_rows(spark: Any, written: Any, path: Path) -> None:
    """What Spark reads back from `path` is exactly `written` (payloads compared by digest)."""

    def digests(df: Any) -> list[tuple]:
        columns = [f"sha2({name}, 256)" if name == "payload" else name for name in df.columns]
        return sorted(tuple(row) for row in df.selectExpr(*columns).collect())

    assert digests(spark.read.parquet(str(path))) == digests(written)


def test_only_columns_of_bounded_size_give_a_row_a_bound():
    from pyspark.sql import types as T

    fixed = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("amount", T.DoubleType()),
            T.StructField("flag", T.BooleanType()),
            T.StructField("day", T.DateType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("dec", T.DecimalType(10, 2)),
            T.StructField(
                "pair", T.StructType([T.StructField("a", T.IntegerType()), T.StructField("b", T.ShortType())])
            ),
        ]
    )
    # bits: the row's struct 8; values plus a validity byte each: 64+8, 64+8, 1+8, 32+8, 64+8,
    # 128+8; the nested struct 8 + (32+8) + (16+8)
    assert arrow_batches.max_row_bytes(fixed) == -(-(8 + 72 + 72 + 9 + 40 + 72 + 136 + 8 + 40 + 24) // 8)
    for variable in (
        T.StringType(),
        T.BinaryType(),
        T.ArrayType(T.LongType()),
        T.MapType(T.StringType(), T.LongType()),
        T.StructType([T.StructField("name", T.StringType())]),
    ):
        schema = T.StructType([*fixed.fields, T.StructField("v", variable)])
        assert arrow_batches.max_row_bytes(schema) is None, variable
    # A string the write itself bounds: its bytes, a validity byte and an 8-byte offset.
    keyed = T.StructType([T.StructField("id", T.LongType()), T.StructField("key", T.StringType())])
    assert arrow_batches.max_row_bytes(keyed, {"key": 100}) == -(-(8 + 72 + 8 + 8 * 108) // 8)


def test_fixed_width_rows_reach_python_unmeasured_in_batches_within_the_bound(
    spark_row_limit_unset, tmp_path, batch_log, monkeypatch
):
    """Spark does not measure the batches of a fixed-width write, and the row limit that stands
    in for the byte bound holds them under it (the bound lowered to 16 KiB, so that a partition of
    2,000 rows fills several batches)."""
    spark = spark_row_limit_unset
    monkeypatch.setattr(arrow_batches, "BATCH_BYTES", 16 * 1024)
    df = _numeric_df(spark, 4000)
    width = arrow_batches.max_row_bytes(df.schema)
    assert width is not None

    batches = _logged_write(df, tmp_path / "out", batch_log)

    assert sum(entry["rows"] for entry in batches) == 4000
    assert {entry["limit"] for entry in batches} == {ARROW_UNMEASURED_BATCHES}
    assert max(entry["rows"] for entry in batches) == 16 * 1024 // width
    assert max(entry["bytes"] for entry in batches) <= 16 * 1024
    _same_rows(spark, df, tmp_path / "out")
    context = spark.sparkContext
    assert context.getLocalProperty(ARROW_MAX_BYTES_PER_BATCH) is None, "the thread's properties are restored"
    assert context.getLocalProperty(ARROW_MAX_RECORDS_PER_BATCH) is None
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None, "the session is untouched"


def test_the_session_row_limit_is_kept_and_the_measurement_skipped(spark, tmp_path, batch_log):
    """The suite's session sets 50 rows per batch; 50 narrow rows fit the bound many times over,
    so the write skips the measurement and keeps the session's row limit."""
    df = _numeric_df(spark, 400)

    batches = _logged_write(df, tmp_path / "out", batch_log)

    assert max(entry["rows"] for entry in batches) == int(spark.conf.get(ARROW_MAX_RECORDS_PER_BATCH))
    assert {entry["limit"] for entry in batches} == {ARROW_UNMEASURED_BATCHES}


def test_a_partitioned_write_bounds_its_partition_keys_and_skips_the_measurement(spark, tmp_path, batch_log):
    """Partition values become strings in the rows sent to Python; the write holds them to
    PARTITION_VALUE_BYTES, so a fixed-width frame partitioned by a string stays unmeasured."""
    # Values partition discovery reads back as strings (a date-like `dt=2024-01-01` is read as a date).
    df = _numeric_df(spark, 400).selectExpr("*", "concat('day-', CAST(id % 3 + 1 AS STRING)) AS dt")

    batches = _logged_write(df, tmp_path / "out", batch_log, partition_by=["dt"])

    assert sum(entry["rows"] for entry in batches) == 400
    assert {entry["limit"] for entry in batches} == {ARROW_UNMEASURED_BATCHES}
    read = spark.read.parquet(str(tmp_path / "out"))
    assert sorted(tuple(row) for row in read.select(*df.columns).collect()) == sorted(
        tuple(row) for row in df.collect()
    )


@pytest.mark.parametrize("route", ["write_committed", "df.write.format('committed')"])
def test_a_partition_value_longer_than_any_path_is_refused_and_nothing_is_committed(spark, tmp_path, route):
    df = spark.range(6, numPartitions=1).selectExpr("id", "IF(id = 4, repeat('x', 1025), 'short') AS part")
    out = tmp_path / "out"

    with pytest.raises(Exception, match="partition column 'part' has a value of more than 1024 bytes"):
        if route == "write_committed":
            write_committed(df, str(out), partition_by="part")
        else:
            register_data_source(spark)
            df.write.format("committed").mode("append").option("partition_by", "part").save(str(out))

    dest = StorePath.parse(str(out))
    assert visible_files(LocalStore(), dest) == {}
    assert_nothing_left_behind(LocalStore(), dest)


def test_a_byte_limit_the_session_sets_is_used_as_it_is(spark, tmp_path, batch_log):
    df = _numeric_df(spark, 200)
    with applied_conf(spark, {ARROW_MAX_BYTES_PER_BATCH: "1048576"}):
        batches = _logged_write(df, tmp_path / "out", batch_log)
        assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == "1048576"
    assert {entry["limit"] for entry in batches} == {"1048576"}


@pytest.mark.parametrize("route", ["write_committed", "df.write.format('committed')"])
def test_one_mebibyte_rows_reach_python_in_batches_within_the_bound(
    spark_row_limit_unset, tmp_path, batch_log, route
):
    """Rows of 1 MiB (80 in the one Spark partition, whose default row limit is 10,000) are cut into
    batches within 64 MiB, and every row is written: ``write_committed``'s measured by Spark, the
    data source's unmeasured and cut in the JVM by their rows' bytes (``source_batches``)."""
    spark = spark_row_limit_unset
    df = _wide_df(spark)
    out = tmp_path / "out"
    if route == "write_committed":
        batches = _logged_write(df, out, batch_log)
        limit = None
    else:
        batches = _logged_source_write(spark, df, out, batch_log)
        limit = ARROW_UNMEASURED_BATCHES

    assert sum(entry["rows"] for entry in batches) == WIDE_ROWS
    assert {entry["limit"] for entry in batches} == {limit}
    assert max(entry["bytes"] for entry in batches) <= arrow_batches.BATCH_BYTES + WIDE_ROW_BYTES + 64 * 1024
    assert max(entry["rows"] for entry in batches) < WIDE_ROWS, "the partition was cut into several batches"
    _same_rows(spark, df, out)


def test_the_data_source_sends_fixed_width_rows_unmeasured_at_the_sessions_row_limit(
    spark, tmp_path, batch_log
):
    """As the user registered it, with the session as it was: no per-row measurement, and the
    batches are the session's row limit (the suite's 50 rows), the session and thread unchanged."""
    df = _numeric_df(spark, 1000)
    batches = _logged_source_write(spark, df, tmp_path / "out", batch_log)

    assert sum(entry["rows"] for entry in batches) == 1000
    assert {entry["limit"] for entry in batches} == {ARROW_UNMEASURED_BATCHES}
    assert max(entry["rows"] for entry in batches) == int(spark.conf.get(ARROW_MAX_RECORDS_PER_BATCH))
    _same_rows(spark, df, tmp_path / "out")
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None, "the session is untouched"
    assert spark.sparkContext.getLocalProperty(ARROW_MAX_BYTES_PER_BATCH) is None


def test_the_data_source_keeps_a_byte_limit_the_session_or_the_thread_sets(spark, tmp_path, batch_log):
    df = _numeric_df(spark, 200)
    with applied_conf(spark, {ARROW_MAX_BYTES_PER_BATCH: "1048576"}):
        session = _logged_source_write(spark, df, tmp_path / "session", batch_log)
    assert {entry["limit"] for entry in session} == {"1048576"}

    (tmp_path / "thread").mkdir()
    thread_log = BatchLog(str(tmp_path / "thread"))
    context = spark.sparkContext
    context.setLocalProperty(ARROW_MAX_BYTES_PER_BATCH, "2097152")
    try:
        thread = _logged_source_write(spark, df, tmp_path / "thread-out", thread_log)
    finally:
        context.setLocalProperty(ARROW_MAX_BYTES_PER_BATCH, None)
    assert {entry["limit"] for entry in thread} == {"2097152"}


def test_another_python_data_source_stays_measured(spark, tmp_path, batch_log):
    """The rule wraps the writes of the source it was installed for, by name, and no other."""
    df = _numeric_df(spark, 200)
    register_data_source(spark)
    spark.dataSource.register(observed_data_source(batch_log, name="someone_elses"))
    df.write.format("someone_elses").mode("append").option("format", "parquet").save(str(tmp_path / "out"))

    batches = [entry for entry in batch_log.read() if entry["rows"]]
    assert sum(entry["rows"] for entry in batches) == 200
    assert {entry["limit"] for entry in batches} == {None}, "Spark's own byte limit, measured"


def test_registering_says_what_it_adds_to_the_session_and_adds_one_rule(spark, caplog):
    with caplog.at_level(logging.INFO, logger="airflow_commit_provider.spark"):
        register_data_source(spark)
        register_data_source(spark)
    said = [
        record.getMessage() for record in caplog.records if source_batches.RULE_CLASS in record.getMessage()
    ]
    assert len(said) == 2 and "other queries and writes are unchanged" in said[0]
    rules = spark._jsparkSession.experimental().extraOptimizations()
    names = [rules.apply(index).getClass().getName() for index in range(rules.size())]
    assert names.count(source_batches.RULE_CLASS) == 1, names


def _logged_source_write(spark: Any, df: Any, path: Path, batch_log: BatchLog) -> list[dict[str, Any]]:
    """``df.write.format("committed")`` to `path`, registered as a user would
    (``register_data_source``), its tasks logging their batches; the non-empty batches."""
    register_data_source(spark)
    spark.dataSource.register(observed_data_source(batch_log))
    try:
        df.write.format("committed").mode("append").option("format", "parquet").save(str(path))
    finally:
        register_data_source(spark)
    return [entry for entry in batch_log.read() if entry["rows"]]


def test_registering_with_unmeasured_batches_says_so_and_never_overrides_the_session(
    spark, tmp_path, batch_log, caplog
):
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None
    register_data_source(spark)
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None, "registering alone changes nothing"

    with applied_conf(spark, {ARROW_MAX_BYTES_PER_BATCH: "1048576"}):
        register_data_source(spark, unmeasured_arrow_batches=True)
        assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == "1048576", "the session's value is kept"

    try:
        with caplog.at_level(logging.WARNING, logger="airflow_commit_provider.spark"):
            register_data_source(spark, unmeasured_arrow_batches=True)
        assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == ARROW_UNMEASURED_BATCHES
        [warning] = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
        assert f"{ARROW_MAX_BYTES_PER_BATCH}={ARROW_UNMEASURED_BATCHES}" in warning

        spark.dataSource.register(observed_data_source(batch_log))
        _numeric_df(spark, 200).write.format("committed").mode("append").option("format", "parquet").save(
            str(tmp_path / "out")
        )
        batches = [entry for entry in batch_log.read() if entry["rows"]]
        assert sum(entry["rows"] for entry in batches) == 200
        assert {entry["limit"] for entry in batches} == {ARROW_UNMEASURED_BATCHES}
    finally:
        spark.conf.unset(ARROW_MAX_BYTES_PER_BATCH)
        register_data_source(spark)


def test_a_plan_that_sends_other_rows_to_python_is_told_apart(spark, tmp_path):
    from pyspark.sql import functions as F

    plain = _numeric_df(spark, 10)
    assert not arrow_batches.sends_rows_to_python(plain)
    assert not arrow_batches.sends_rows_to_python(plain.groupBy("k").count()), "a shuffle is not Python"
    selected = plain.mapInArrow(ObservedSelect(BatchLog(str(tmp_path)), ("id",)), "id long")
    assert arrow_batches.sends_rows_to_python(selected)
    plus_one = F.udf(lambda value: value + 1, "long")
    assert arrow_batches.sends_rows_to_python(plain.select(plus_one("id").alias("id")))
    # A cached frame is computed by the first job that reads it: its own plan counts.
    cached_plain, cached_selected = plain.cache(), selected.cache()
    try:
        assert not arrow_batches.sends_rows_to_python(cached_plain.select("id"))
        assert arrow_batches.sends_rows_to_python(cached_selected.select("id"))
    finally:
        cached_plain.unpersist()
        cached_selected.unpersist()


@pytest.mark.parametrize("route", ["write_committed", "df.write.format('committed')"])
def test_a_write_after_another_python_step_on_wide_rows_keeps_that_step_measured(
    spark_row_limit_unset, tmp_path, batch_log, route
):
    """A ``mapInArrow`` that receives 1 MiB rows and passes on their ids: the frame written has a
    fixed width, but the step before the write gets the wide rows in the same task. Unmeasured,
    under the row limit worked out from the written schema (10,000), that step's batches were
    whole partitions of 80 rows (80 MiB). ``write_committed``'s job keeps Spark's measurement; the
    data source's rule turns it off only for the write's own runner, which the task starts after
    the step's: either way the step's batches stay within 64 MiB."""
    spark = spark_row_limit_unset
    (tmp_path / "upstream").mkdir()
    upstream = BatchLog(str(tmp_path / "upstream"))
    df = _wide_df(spark).mapInArrow(ObservedSelect(upstream, ("id",)), "id long")
    out = tmp_path / "out"
    if route == "write_committed":
        instrumentation = WriteInstrumentation(task=TaskInstrumentation(received_batch=batch_log))
        assert instrumented_write(df, str(out), instrumentation, format="parquet").rows == WIDE_ROWS
        written = [entry for entry in batch_log.read() if entry["rows"]]
        assert {entry["limit"] for entry in written} == {None}, "the write's job is measured by Spark"
    else:
        written = _logged_source_write(spark, df, out, batch_log)
        assert {entry["limit"] for entry in written} == {ARROW_UNMEASURED_BATCHES}

    received = [entry for entry in upstream.read() if entry["rows"]]
    assert sum(entry["rows"] for entry in received) == WIDE_ROWS
    assert max(entry["bytes"] for entry in received) <= arrow_batches.BATCH_BYTES + WIDE_ROW_BYTES + 64 * 1024
    assert sorted(row.id for row in spark.read.parquet(str(out)).collect()) == list(range(WIDE_ROWS))


def test_on_spark_connect_a_server_with_the_extension_sends_the_rows_unmeasured(
    connect_spark, tmp_path, batch_log
):
    """The suite's Connect server names ``BoundedArrowBatchesExtension`` in ``spark.sql.extensions``
    (``source_batches.server_conf``), as a platform team would: a client's data source writes get
    the rule the client cannot install, with the constants a classic session is given."""
    df = _numeric_df(connect_spark, 1000)
    batches = _logged_source_write(connect_spark, df, tmp_path / "out", batch_log)

    assert sum(entry["rows"] for entry in batches) == 1000
    assert {entry["limit"] for entry in batches} == {ARROW_UNMEASURED_BATCHES}
    assert max(entry["rows"] for entry in batches) == 50, "the server's row limit"
    _same_rows(connect_spark, df, tmp_path / "out")
