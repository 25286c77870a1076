"""The same table as Spark would write it: a committed write (``write_committed`` and
``df.write.format("committed")``) reads back exactly as Spark's own ``df.write.<format>`` of the same
DataFrame does.

One DataFrame holds every type Spark SQL writes, edge values and nulls everywhere
(``fidelity_data``). Each case writes it with us and with Spark's own writer, into ``file://``
directories, and checks:

- ``spark.read``: the same schema (names, types, nullability, order) and the same rows (NaN, -0.0,
  map entry order and microseconds included);
- the same partition directories (escaping, ``__HIVE_DEFAULT_PARTITION__``) and file names (but
  the job ID);
- the same metadata readers rely on: parquet's Spark schema footer, orc's types and type attributes;
- csv/json: file for file, the same bytes (decompressed);
- pyarrow and DuckDB read our files as they read Spark's.

Types a format cannot hold faithfully are refused on the driver before any work, naming the column.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from fidelity_data import PARTITION_COLUMNS, WIDE_PARTITION_COLUMNS, rich_df
from fidelity_support import (
    assert_same_read,
    duckdb_rows,
    file_names,
    orc_file_schema,
    parquet_spark_schema,
    partition_directories,
    pyarrow_rows,
    rows_diff,
    spark_read,
    text_contents,
)
from pyspark.sql import types as spark_types
from spark_support import visible_files

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import register_data_source, write_committed

pytestmark = pytest.mark.spark

#: Writer (and reader) options per variant: each format's defaults, and csv/json with options.
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "parquet": ("parquet", {}),
    "orc": ("orc", {}),
    # Our csv default is header=true, Spark's false: say it, so both write (and read) a header.
    "csv": ("csv", {"header": "true"}),
    "csv+options": (
        "csv",
        {
            "header": "true",
            "sep": ";",
            "quoteAll": "true",
            "escape": "\\",
            "nullValue": "<null>",
            "dateFormat": "dd/MM/yyyy",
            "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSSSSSXXX",
            "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
            "compression": "gzip",
        },
    ),
    "json": ("json", {}),
    "json+options": (
        "json",
        {
            "dateFormat": "yyyyMMdd",
            "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
            "ignoreNullFields": "false",
            "compression": "gzip",
        },
    ),
}
LAYOUTS = {"flat": (), "partitioned": PARTITION_COLUMNS, "wide": WIDE_PARTITION_COLUMNS}
#: Columns csv cannot hold (Spark's csv writer refuses nested types).
NESTED_COLUMNS = ("arr", "arr2", "m", "m2", "st", "arr_st")
#: Columns holding `timestamp` values: pyarrow's ORC reader reads timestamps as nanoseconds
#: (1677-2262) and fails on Spark's own files for the others.
LTZ_COLUMNS = ("ts", "arr_st", "w_ts")

#: Each format's layouts once, and each way in (``write_committed``, the data source) for parquet
#: and orc, flat and partitioned, dealt so no case repeats what another checks: the data source hands
#: the same writer the same Arrow batches, and a layout is a format's, not a method's. csv/json flat
#: is checked with their options (their defaults, partitioned). 9 cases; the full product was 15
#: writes of the rich DataFrame, the suite's dearest Spark jobs.
CASES = [
    pytest.param(variant, layout, method, id=f"{variant}-{layout}-{method}")
    for variant, layout, method in [
        ("parquet", "flat", "datasource"),
        ("parquet", "partitioned", "write_committed"),
        ("parquet", "wide", "write_committed"),
        ("orc", "flat", "write_committed"),
        ("orc", "partitioned", "datasource"),
        ("csv", "partitioned", "write_committed"),
        ("csv+options", "flat", "write_committed"),
        ("json", "partitioned", "write_committed"),
        ("json+options", "flat", "write_committed"),
    ]
]


@pytest.fixture(scope="module")
def frames(spark: Any) -> dict[str, Any]:
    """The rich DataFrame per format (cached): orc's with timestamps its writer can store, csv's
    without nested columns."""
    everything = rich_df(spark).cache()
    return {
        "parquet": everything,
        "json": everything,
        "orc": rich_df(spark, orc=True).cache(),
        "csv": everything.drop(*NESTED_COLUMNS),
    }


@pytest.fixture(scope="module")
def spark_written(frames: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Spark's own write of a variant and layout (once per module: the cases share it)."""
    root = tmp_path_factory.mktemp("spark-own")
    written: dict[tuple[str, str], Path] = {}

    def write(variant: str, layout: str) -> Path:
        if (variant, layout) not in written:
            fmt, options = VARIANTS[variant]
            path = root / f"{variant}-{layout}"
            writer = frames[fmt].write.format(fmt).options(**options)
            if LAYOUTS[layout]:
                writer = writer.partitionBy(*LAYOUTS[layout])
            writer.save(str(path))
            written[(variant, layout)] = path
        return written[(variant, layout)]

    return write


def _write_ours(
    df: Any, path: Path, fmt: str, options: dict[str, str], partition_by: tuple, method: str
) -> None:
    if method == "write_committed":
        write_committed(df, str(path), format=fmt, partition_by=list(partition_by), options=options)
        return
    register_data_source(df.sparkSession)
    writer = df.write.format("committed").mode("append").option("format", fmt).options(**options)
    if partition_by:
        writer = writer.option("partition_by", ",".join(partition_by))
    writer.save(str(path))


def _read_options(fmt: str, options: dict[str, str]) -> dict[str, str]:
    read = {key: value for key, value in options.items() if key != "compression"}
    if fmt == "csv":
        read.update(inferSchema="true", multiLine="true")
    return read


@pytest.mark.parametrize(("variant", "layout", "method"), CASES)
def test_reads_back_as_sparks_own_write(spark, frames, spark_written, tmp_path, variant, layout, method):
    fmt, options = VARIANTS[variant]
    partition_by = LAYOUTS[layout]
    ours = tmp_path / "ours"
    _write_ours(frames[fmt], ours, fmt, options, partition_by, method)
    spark_own = spark_written(variant, layout)

    read_options = _read_options(fmt, options)
    assert_same_read(
        spark_read(spark, fmt, ours, read_options),
        spark_read(spark, fmt, spark_own, read_options),
        "spark.read",
    )
    assert partition_directories(ours) == partition_directories(spark_own)
    assert file_names(ours) == file_names(spark_own)

    if fmt in ("csv", "json"):
        assert text_contents(ours) == text_contents(spark_own), "not the bytes Spark's writer writes"
    elif fmt == "parquet":
        assert parquet_spark_schema(ours) == parquet_spark_schema(spark_own)
    else:
        # Types and type attributes; not the file's user metadata (org.apache.spark.version), which
        # pyarrow's ORC writer cannot write and no Spark reader reads for orc.
        ours_schema = orc_file_schema(ours, instants_as_wall_clocks=True)
        spark_schema = orc_file_schema(spark_own).remove_metadata()
        assert ours_schema.equals(spark_schema, check_metadata=True), (
            "ORC types/attributes differ:\n"
            + "\n".join(
                difflib.unified_diff(
                    str(spark_schema).splitlines(),
                    str(ours_schema).splitlines(),
                    "Spark's",
                    "ours",
                    lineterm="",
                )
            )
        )

    columns = [name for name in frames[fmt].columns if not (fmt == "orc" and name in LTZ_COLUMNS)]
    if fmt in ("parquet", "orc"):
        got, expected = (
            pyarrow_rows(ours, fmt, partition_by, columns),
            pyarrow_rows(spark_own, fmt, partition_by, columns),
        )
        assert got == expected, f"pyarrow reads our files differently:\n{rows_diff(got, expected, columns)}"
    if fmt != "orc":  # DuckDB has no ORC reader (its orc extension is not bundled)
        got, expected = (
            duckdb_rows(ours, fmt, bool(partition_by), columns),
            duckdb_rows(spark_own, fmt, bool(partition_by), columns),
        )
        assert got == expected, f"DuckDB reads our files differently:\n{rows_diff(got, expected, columns)}"


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_empty_write_keeps_the_schema(spark, frames, tmp_path, fmt):
    """An empty write leaves one empty file whose schema reads back as Spark's own empty file's."""
    empty = frames[fmt].limit(0)
    write_committed(empty, str(tmp_path / "ours"), format=fmt)
    empty.write.format(fmt).save(str(tmp_path / "spark"))
    assert_same_read(
        spark_read(spark, fmt, tmp_path / "ours", {}),
        spark_read(spark, fmt, tmp_path / "spark", {}),
        "spark.read",
    )


REFUSED = [
    # (expression, format, column path, Spark type); the Spark writer refuses these too, but year-month
    # intervals in parquet/orc, which pyarrow cannot hold.
    ("INTERVAL '1-2' YEAR TO MONTH", "parquet", "c", "interval year to month"),
    ("named_struct('x', INTERVAL '3' MONTH)", "orc", "c.x", "interval month"),
    ("parse_json('[1]')", "orc", "c", "variant"),
    ("parse_json('[1]')", "csv", "c", "variant"),
    ("NULL", "orc", "c", "void"),
    ("NULL", "csv", "c", "void"),
    ("array(1)", "csv", "c", "array<int>"),
    # Spark's TIME type arrived in 4.1; an older PySpark has no such column to refuse.
    *([("TIME'12:34:56'", "json", "c", "time(6)")] if hasattr(spark_types, "TimeType") else []),
    ("make_interval(1, 2)", "json", "c", "interval"),
]


@pytest.mark.parametrize(
    ("expression", "fmt", "path", "type_name"), REFUSED, ids=[f"{r[3]}-{r[1]}" for r in REFUSED]
)
def test_unfaithful_types_are_refused_before_any_work(spark, tmp_path, expression, fmt, path, type_name):
    df = spark.sql(f"SELECT id, {expression} AS c FROM range(2)")
    message = re.escape(f"column '{path}' ({type_name}) cannot be written as {fmt} faithfully: ")
    with pytest.raises(ValueError, match=message):
        write_committed(df, str(tmp_path / "out"), format=fmt)
    assert not (tmp_path / "out").exists(), "refused after the job was set up"
    if fmt in ("parquet", "orc"):
        register_data_source(spark)
        with pytest.raises(Exception, match=message):
            df.write.format("committed").mode("append").option("format", fmt).save(str(tmp_path / "source"))
        assert not (tmp_path / "source").exists(), "refused after the job was set up"


def test_orc_timestamp_pyarrow_cannot_store_fails_the_write_with_nothing_committed(spark, tmp_path):
    """A time before 1970 with a fraction of a second cannot go through pyarrow's ORC writer (its
    nanoseconds come out negative, which Java's ORC reader rejects): the job fails, naming the
    column, and nothing becomes visible."""
    moment = dt.datetime(1800, 1, 1, 0, 0, 0, 500000, tzinfo=dt.timezone.utc)
    df = spark.createDataFrame([(1, moment)], "id INT, ts TIMESTAMP")
    destination = tmp_path / "out"
    with pytest.raises(Exception, match=r"column 'ts': timestamp .* cannot be written as orc faithfully"):
        write_committed(df, str(destination), format="orc")
    assert visible_files(LocalStore(), StorePath.parse(str(destination))) == {}
    assert not (destination / "_SUCCESS").exists()
    shutil.rmtree(destination, ignore_errors=True)
