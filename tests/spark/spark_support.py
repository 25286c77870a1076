"""Data, read-back and invariant helpers shared by the Spark tests."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable
from typing import Any

from support.invariants import assert_nothing_left_behind, is_commit_record, is_temp
from support.workload import ALL_COMMITTERS, supported

from airflow_commit_provider.core.escaping import DEFAULT_PARTITION_NAME, unescape_path_name
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store

FORMATS = ("parquet", "orc", "csv", "json")
LOCAL_COMMITTERS = tuple(name for name in ALL_COMMITTERS if supported(name, LocalStore()))
S3_COMMITTERS = tuple(name for name in ALL_COMMITTERS if supported(name, S3Store()))
COLUMNS = ("id", "name", "amount", "dt", "ts", "flag", "dec", "part")
S3_COLUMNS = ("id", "name", "amount", "flag", "part")


def sample_df(spark: Any, rows: int = 40, partitions: int = 2) -> Any:
    """Every common type; values that survive csv/json text exactly (ms timestamps, binary fractions)."""
    return spark.range(rows, numPartitions=partitions).selectExpr(
        "id",
        "concat('name ', id, ', \"quoted\" ü') AS name",
        "CAST(id AS DOUBLE) / 4 AS amount",
        "date_add(DATE'2024-01-01', CAST(id % 5 AS INT)) AS dt",
        "TIMESTAMP'2024-01-01 00:00:00.125' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts",
        "id % 2 = 0 AS flag",
        "CAST(id AS DECIMAL(10, 2)) AS dec",
        "element_at(array('a', 'b c', 'x=y'), CAST(id % 3 AS INT) + 1) AS part",
    )


def rows_of(df: Any, columns: Iterable[str] = COLUMNS) -> list[tuple]:
    return sorted(tuple(row) for row in df.select(*columns).collect())


def read_local(spark: Any, fmt: str, path: str, schema: Any) -> Any:
    reader = spark.read.schema(schema)
    if fmt == "csv":
        reader = reader.option("header", True)
    return getattr(reader, fmt)(path)


def store_for(dest: StorePath, s3_store: Store | None) -> Store:
    return LocalStore() if dest.is_local else s3_store  # type: ignore[return-value]


def visible_files(store: Store, dest: StorePath) -> dict[str, int]:
    return {
        status.path.relative_to(dest): status.size
        for status in store.list_files(dest)
        if not is_temp(status.path.relative_to(dest)) and not is_commit_record(status.path.relative_to(dest))
    }


def assert_committed_write(
    store: Store, dest: StorePath, summary: Any, *, staging_root: str | None = None
) -> dict[str, int]:
    """The write is committed, complete and exclusive, its names are Spark's, nothing is left behind."""
    files = visible_files(store, dest)
    success_path = dest.join("_SUCCESS")
    success = SuccessData.from_bytes(store.read_bytes(success_path), str(success_path))
    assert success.job_id == summary.job_id
    listed = {
        StorePath.from_uri(entry.uri).relative_to(dest): entry.size
        for entry in success.iter_all_files(store, dest)
    }
    assert listed == files, f"_SUCCESS lists {sorted(listed)}, the destination holds {sorted(files)}"
    assert summary.files == len(files) > 0
    assert summary.bytes == sum(files.values()) > 0, "bytes written must be reported exactly (HADOOP-17414)"
    # Spark names files -cNNN, and .cNNN in partition directories (its dynamic-partition writer).
    pattern = re.compile(rf"^part-\d{{5}}-{re.escape(summary.job_id)}[-.]c\d{{3}}\.[a-z0-9.]+$")
    for name in files:
        assert pattern.match(name.rsplit("/", 1)[-1]), f"not a Spark file name: {name}"
    assert_nothing_left_behind(store, dest)
    if staging_root is not None:
        assert not os.path.exists(os.path.join(staging_root, summary.job_id)), "local staging files left"
    return files


def partition_values(relative: str) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for part in relative.split("/")[:-1]:
        name, _, value = part.partition("=")
        values[unescape_path_name(name)] = (
            None if value == DEFAULT_PARTITION_NAME else unescape_path_name(value)
        )
    return values


def read_s3_rows(
    arrow_s3: Any, fmt: str, dest: StorePath, columns: Iterable[str] = S3_COLUMNS
) -> list[tuple]:
    """Rows under an S3 destination read with pyarrow (not Spark), partition values from the paths."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq
    from pyarrow import fs, orc

    columns = tuple(columns)
    base = f"{dest.bucket}/{dest.key}"
    rows = []
    for info in arrow_s3.get_file_info(fs.FileSelector(base, recursive=True)):
        if info.type != fs.FileType.File:
            continue
        relative = info.path[len(base) + 1 :]
        if is_temp(relative) or is_commit_record(relative):
            continue
        with arrow_s3.open_input_file(info.path) as handle:
            data = handle.read()
        if fmt == "parquet":
            table = pq.read_table(pa.BufferReader(data))
        elif fmt == "orc":
            table = orc.ORCFile(pa.BufferReader(data)).read()
        elif fmt == "csv":
            table = pcsv.read_csv(
                io.BytesIO(data),
                parse_options=pcsv.ParseOptions(escape_char="\\"),
                convert_options=pcsv.ConvertOptions(
                    column_types={
                        "id": pa.int64(),
                        "name": pa.string(),
                        "amount": pa.float64(),
                        "flag": pa.bool_(),
                    }
                ),
            )
        else:
            table = pjson.read_json(io.BytesIO(data))
        partitions = partition_values(relative)
        for record in table.to_pylist():
            record.update(partitions)
            rows.append(tuple(record[column] for column in columns))
    return sorted(rows)
