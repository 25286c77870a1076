"""Reading a committed write and Spark's own write of the same DataFrame side by side: with Spark,
pyarrow and DuckDB, file by file for text formats, footer by footer for parquet and orc."""

from __future__ import annotations

import bz2
import collections
import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

from fidelity_data import arrow_rows

#: A data file's place in a write, independent of the job ID: (directory, part-NNNNN, cNNN).
_PART = re.compile(r"^(part-\d{5})-.+?[-.](c\d{3})\..+$")


def spark_read(spark: Any, fmt: str, path: Path, options: dict[str, str]) -> Any:
    return spark.read.format(fmt).options(**options).load(str(path))


def schema_diff(got: Any, expected: Any) -> str:
    """The fields whose name, type or nullability differ, one per line."""
    lines = []
    for index in range(max(len(got.fields), len(expected.fields))):
        ours = got.fields[index] if index < len(got.fields) else None
        spark = expected.fields[index] if index < len(expected.fields) else None
        if ours != spark:
            lines.append(f"  #{index}: ours {_field(ours)} | Spark's {_field(spark)}")
    return "\n".join(lines)


def _field(field: Any) -> str:
    if field is None:
        return "-"
    return f"{field.name} {field.dataType.simpleString()}{'' if field.nullable else ' NOT NULL'}"


def rows_diff(got: list[tuple], expected: list[tuple], names: list[str]) -> str:
    """Per column, values found only on one side (with counts), for a readable failure."""
    lines = []
    for index, name in enumerate(names):
        ours = collections.Counter(row[index] for row in got)
        spark = collections.Counter(row[index] for row in expected)
        if ours != spark:
            lines.append(f"  {name}: only ours {list((ours - spark).items())[:3]}")
            lines.append(f"  {' ' * len(name)}  only Spark's {list((spark - ours).items())[:3]}")
    return "\n".join(lines) or "  (same values per column, paired differently)"


def assert_same_read(got: Any, expected: Any, reader: str) -> None:
    """Same schema (names, types, nullability, order) and the same rows, as `reader` returns them."""
    assert got.schema == expected.schema, (
        f"{reader}: schema differs\n{schema_diff(got.schema, expected.schema)}"
    )
    ours, spark = arrow_rows(got.toArrow()), arrow_rows(expected.toArrow())
    assert ours == spark, f"{reader}: values differ\n{rows_diff(ours, spark, got.columns)}"


def data_files(root: Path) -> dict[tuple[str, str, str], Path]:
    """{(directory, part, counter): file} of a write's visible data files (Spark's or ours)."""
    files = {}
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if not name.startswith(("_", "."))]
        for name in names:
            match = _PART.match(name)
            if match:
                relative = os.path.relpath(directory, root)
                files[(relative, match.group(1), match.group(2))] = Path(directory, name)
    return files


def partition_directories(root: Path) -> set[str]:
    return {directory for directory, _, _ in data_files(root)}


def file_names(root: Path) -> set[str]:
    """Each data file's path with the job ID (a uuid) left out: ``d=1/part-00000-<job>.c000.csv``."""
    return {
        str(path.relative_to(root).with_name(re.sub(r"^(part-\d{5})-[0-9a-f-]{36}", r"\1-<job>", path.name)))
        for path in data_files(root).values()
    }


def text_contents(root: Path) -> dict[tuple[str, str, str], bytes]:
    """Each csv/json file's bytes, decompressed."""
    contents = {}
    for key, path in data_files(root).items():
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        elif path.suffix == ".bz2":
            data = bz2.decompress(data)
        contents[key] = data
    return contents


def parquet_spark_schema(root: Path) -> Any:
    """The Spark schema JSON Spark's reader takes from the first data file's footer."""
    import pyarrow.parquet as pq

    path = sorted(data_files(root).values())[0]
    metadata = pq.ParquetFile(path).schema_arrow.metadata or {}
    return json.loads(metadata[b"org.apache.spark.sql.parquet.row.metadata"])


def orc_file_schema(root: Path, *, instants_as_wall_clocks: bool = False) -> Any:
    """The first data file's ORC schema as pyarrow reports it (types, and type attributes as field
    metadata, e.g. ``spark.sql.catalyst.type``). `instants_as_wall_clocks`: report ORC ``timestamp
    with local time zone`` as ``timestamp``, the one layout difference ours has on purpose
    (orc_layout's module doc)."""
    import pyarrow as pa
    from pyarrow import orc

    schema = orc.ORCFile(str(sorted(data_files(root).values())[0])).schema
    if not instants_as_wall_clocks:
        return schema
    return pa.schema([field.with_type(_wall_clock(field.type)) for field in schema], metadata=schema.metadata)


def _wall_clock(arrow_type: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type):
        return pa.timestamp(arrow_type.unit)
    if pa.types.is_map(arrow_type):
        return pa.map_(
            arrow_type.key_field.with_type(_wall_clock(arrow_type.key_type)),
            arrow_type.item_field.with_type(_wall_clock(arrow_type.item_type)),
        )
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(_wall_clock(field.type)) for field in arrow_type])
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_wall_clock(arrow_type.value_type)))
    return arrow_type


def pyarrow_rows(root: Path, fmt: str, partition_columns: tuple[str, ...], columns: list[str]) -> list[tuple]:
    """The rows pyarrow.dataset reads (hive partitions as strings), in canonical form."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    partitioning = None
    if partition_columns:
        partitioning = ds.partitioning(
            pa.schema([(name, pa.string()) for name in partition_columns]), flavor="hive"
        )
    file_format: Any = fmt
    if fmt == "parquet":  # Spark writes INT96 timestamps: read them as microseconds, not nanoseconds
        file_format = ds.ParquetFileFormat(read_options={"coerce_int96_timestamp_unit": "us"})
    dataset = ds.dataset(str(root), format=file_format, partitioning=partitioning)
    # Spark's ORC files hold hybrid-calendar day numbers: 0001-01-01 is stored as 0000-12-30.
    return arrow_rows(dataset.to_table(columns=columns), raw_datetimes=fmt == "orc")


def duckdb_rows(root: Path, fmt: str, partitioned: bool, columns: list[str]) -> list[tuple]:
    """The rows DuckDB reads (``read_parquet``/``read_csv``/``read_json`` over every data file, hive
    partitions as strings), in canonical form."""
    import duckdb

    pattern = str(root / "**" / f"part-*.{fmt}*")
    reader = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}[fmt]
    options = f"hive_partitioning = {str(partitioned).lower()}"
    if partitioned:
        options += ", hive_types_autocast = false"
    selected = ", ".join(f'"{name}"' for name in columns)
    with duckdb.connect() as connection:
        table = connection.sql(f"SELECT {selected} FROM {reader}('{pattern}', {options})").to_arrow_table()
    return arrow_rows(table)
