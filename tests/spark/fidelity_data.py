"""One DataFrame with every type Spark SQL writes, edge values and nulls everywhere, and the
canonical form its values are compared in (NaN, -0.0, maps in stored order, nested rows, datetimes).

Row 0 is null in every nullable column; the other rows cycle through edge values with different
periods, so every value meets the others and each partition column holds several values (nulls,
empty strings and characters that partition directories must escape included).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

UTC = dt.timezone.utc
NAN, INF = float("nan"), float("inf")

#: Data columns: every type, nested types nested in each other.
DATA_DDL = ", ".join(
    [
        "b BOOLEAN",
        "i8 TINYINT",
        "i16 SMALLINT",
        "i32 INT",
        "i64 BIGINT",
        "f32 FLOAT",
        "f64 DOUBLE",
        "s STRING",
        "dec5 DECIMAL(5,2)",
        "dec18 DECIMAL(18,4)",
        "dec38 DECIMAL(38,10)",
        "d DATE",
        "ts TIMESTAMP",
        "ts_ntz TIMESTAMP_NTZ",
        "bin BINARY",
        "arr ARRAY<INT>",
        "arr2 ARRAY<ARRAY<STRING>>",
        "m MAP<STRING, INT>",
        "m2 MAP<INT, STRUCT<x: DOUBLE, y: ARRAY<TIMESTAMP_NTZ>>>",
        "st STRUCT<a: INT, b: STRING, c: STRUCT<d: DATE, e: ARRAY<DECIMAL(18,4)>>, f: MAP<STRING, BINARY>>",
        "arr_st ARRAY<STRUCT<k: BIGINT, v: MAP<STRING, STRING>, t: TIMESTAMP>>",
    ]
)
#: The partition columns both write paths accept (write_committed and the data source).
PARTITION_DDL = "p_str STRING, p_int INT, p_date DATE, p_bool BOOLEAN"
PARTITION_COLUMNS = ("p_str", "p_int", "p_date", "p_bool")
#: Partition column types only write_committed accepts (Spark casts them to directory names).
WIDE_PARTITION_DDL = (
    "w_i8 TINYINT, w_i16 SMALLINT, w_i64 BIGINT, w_f32 FLOAT, w_f64 DOUBLE, w_dec DECIMAL(10,2), "
    "w_ts TIMESTAMP, w_ts_ntz TIMESTAMP_NTZ"
)
WIDE_PARTITION_COLUMNS = ("w_i8", "w_i16", "w_i64", "w_f32", "w_f64", "w_dec", "w_ts", "w_ts_ntz")
DDL = f"{DATA_DDL}, {PARTITION_DDL}, {WIDE_PARTITION_DDL}"
ROWS = 36

_D = dt.date
_T = dt.datetime
_DATES = [
    _D(1, 1, 1),
    _D(1582, 10, 4),
    _D(1582, 10, 10),  # inside the Julian->Gregorian gap: exists only in the proleptic calendar
    _D(1582, 10, 15),
    _D(1899, 12, 31),
    _D(1969, 12, 31),
    _D(1970, 1, 1),
    _D(2000, 2, 29),
    _D(2024, 6, 30),
    _D(9999, 12, 31),
]
_LOCAL_TIMES = [
    _T(1, 1, 1, 0, 0, 0),
    _T(1582, 10, 10, 12, 0, 0, 1),
    _T(1800, 6, 15, 12, 34, 56, 789012),
    _T(1899, 12, 31, 23, 59, 59, 999999),
    _T(1969, 12, 31, 23, 59, 59, 999999),
    _T(1969, 12, 31, 23, 59, 59, 500000),
    _T(1970, 1, 1),
    _T(2000, 2, 29, 12, 0, 0, 1),
    _T(2024, 3, 10, 2, 30, 0, 500000),
    _T(9999, 12, 31, 23, 59, 59, 999999),
]
_STRINGS = [
    "",
    "plain",
    "ünïcødé ✓ 日本語 🎉",
    'with "quotes", commas, and\nnewline',
    "tab\there\r\n",
    "  padded  ",
    "\\backslash\\",
    "null",
    "NULL",
]


def _cycle(values: list[Any], index: int) -> Any:
    return values[index % len(values)]


def _orc_writable(moment: dt.datetime) -> dt.datetime:
    """A UTC time pyarrow's ORC writer can store (see orc_layout): whole seconds before 1970, but
    for the last second before the epoch."""
    if moment < _T(1969, 12, 31, 23, 59, 59, tzinfo=UTC) and moment.microsecond:
        return moment.replace(microsecond=0)
    return moment


def _row(index: int, orc: bool) -> tuple:
    if index == 0:
        return (None,) * 21 + (None,) * 4 + (None,) * 8
    n = index - 1
    local_time = _cycle(_LOCAL_TIMES, n)
    utc = (
        (lambda moment: _orc_writable(moment.replace(tzinfo=UTC)))
        if orc
        else (lambda moment: moment.replace(tzinfo=UTC))
    )
    return (
        n % 2 == 0,
        _cycle([-128, 127, 0, -1, 1], n),
        _cycle([-32768, 32767, 0], n),
        _cycle([-(2**31), 2**31 - 1, 0, 42], n),
        _cycle([-(2**63), 2**63 - 1, 0, 1234567890123], n),
        _cycle([NAN, INF, -INF, -0.0, 0.0, 1.5, 3.4028234663852886e38, 1.401298464324817e-45, -2.5], n),
        _cycle([NAN, INF, -INF, -0.0, 0.0, 0.1, 1.7976931348623157e308, 5e-324, -1e-300], n),
        _cycle(_STRINGS, n),
        _cycle([Decimal("-999.99"), Decimal("999.99"), Decimal("0.00"), Decimal("0.01"), None], n),
        _cycle([Decimal("-99999999999999.9999"), Decimal("99999999999999.9999"), Decimal("1.0001")], n),
        _cycle(
            [
                Decimal("9999999999999999999999999999.9999999999"),
                Decimal("-9999999999999999999999999999.9999999999"),
                Decimal("0E-10"),
                Decimal("-12345678901234567890.1234567890"),
            ],
            n,
        ),
        _cycle(_DATES, n),
        utc(local_time),
        _cycle(_LOCAL_TIMES, n + 3),
        _cycle([b"", b"\x00", bytes(range(256)), "ü".encode(), b"\xff\xfe", None], n),
        _cycle([[], [1, None, 3], [None], [-(2**31), 2**31 - 1], None], n),
        _cycle([[[]], [["a", None], None, []], [[""]], [], None], n),
        _cycle([{}, {"b": 1, "a": None}, {"ü": -1, "": 0, "Z": 7}, None], n),
        _cycle(
            [
                {2: (1.5, [local_time, None]), -7: None, 1: None},
                {0: (NAN, None)},
                {},
                None,
                {-1: (None, [])},
            ],
            n,
        ),
        _cycle(
            [
                (1, "x", (_cycle(_DATES, n + 1), [Decimal("1.5000"), None]), {"n": None, "k": b"v"}),
                (None, None, None, None),
                None,
                (0, "", (None, []), {}),
            ],
            n,
        ),
        _cycle(
            [
                [(1, {"c": None, "a": "b"}, utc(local_time)), None, (None, None, None)],
                [],
                None,
            ],
            n,
        ),
        # Partition columns both paths accept: nulls, '' and characters directory names escape.
        _cycle(["a", "b c", "x=y/z", "50%", "ü", "", None, "#?:*", "a'b\"c{[]^}\\"], n),
        _cycle([1, -1, 0, None], n),
        _cycle([_D(1970, 1, 1), _D(2024, 1, 1), _D(1, 1, 1), None], n),
        _cycle([True, False, None], n),
        # Partition column types only write_committed accepts.
        _cycle([-128, 127, None], n),
        _cycle([-32768, 7, None], n),
        _cycle([-(2**63), 2**63 - 1, None], n),
        _cycle([1.5, -0.0, NAN, INF, None], n),
        _cycle([0.1, -0.0, NAN, -INF, 1e300, None], n),
        _cycle([Decimal("12345678.90"), Decimal("-0.01"), None], n),
        _cycle([_T(2024, 1, 1, tzinfo=UTC), utc(_T(1800, 6, 15, 12, 34, 56, 789012)), None], n),
        _cycle([_T(2024, 1, 1, 23, 59, 59, 1), _T(1, 1, 1), None], n),
    )


def rich_df(spark: Any, *, orc: bool = False, partitions: int = 2) -> Any:
    """The DataFrame every fidelity test writes: ROWS rows over `partitions` Spark partitions. With
    `orc`, its ``timestamp`` values are ones pyarrow's ORC writer can store (no fraction of a
    second before 1969-12-31 23:59:59 UTC; the refusal of the others is tested on its own)."""
    rows = [_row(index, orc) for index in range(ROWS)]
    return spark.createDataFrame(rows, DDL).repartition(partitions)


def canonical(value: Any) -> Any:
    """A value in a form that compares exactly and sorts: NaN equals NaN, -0.0 differs from 0.0,
    maps are sorted items, rows and Arrow structs are tuples, aware datetimes are naive UTC."""
    if value is None:
        return None
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("bytes", bytes(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return ("datetime", value.isoformat())
    if isinstance(value, dt.date):
        return ("date", value.isoformat())
    if isinstance(value, Decimal):
        return ("decimal", str(value))
    if isinstance(value, dict):  # in stored order: Spark's ORC writer sorts entries by key
        return ("map", tuple((canonical(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, tuple):  # a Row is a tuple
        return ("struct", tuple(canonical(item) for item in value))
    if isinstance(value, list):
        return ("list", tuple(canonical(item) for item in value))
    return (type(value).__name__, value)


def canonical_rows(rows: Any) -> list[tuple]:
    """Rows (Spark Rows or tuples) in canonical form, sorted."""
    return sorted((tuple(canonical(value) for value in row) for row in rows), key=repr)


def _arrow_value(value: Any, arrow_type: Any) -> Any:
    """A Python value from Arrow's ``to_pylist`` in canonical form, guided by its Arrow type (maps
    come as lists of pairs, structs as dicts)."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        items = (
            (_arrow_value(k, arrow_type.key_type), _arrow_value(v, arrow_type.item_type)) for k, v in value
        )
        return ("map", tuple(items))
    if pa.types.is_struct(arrow_type):
        return (
            "struct",
            tuple(_arrow_value(value[field.name], field.type) for field in arrow_type),
        )
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return ("list", tuple(_arrow_value(item, arrow_type.value_type) for item in value))
    return canonical(value)


def _raw_type(arrow_type: Any) -> Any:
    """The type with dates and timestamps as their integers (days, units since the epoch)."""
    import pyarrow as pa

    if pa.types.is_date32(arrow_type):
        return pa.int32()
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_map(arrow_type):
        return pa.map_(
            arrow_type.key_field.with_type(_raw_type(arrow_type.key_type)),
            arrow_type.item_field.with_type(_raw_type(arrow_type.item_type)),
        )
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(_raw_type(field.type)) for field in arrow_type])
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_raw_type(arrow_type.value_type)))
    return arrow_type


def arrow_rows(table: Any, *, raw_datetimes: bool = False) -> list[tuple]:
    """The rows of an Arrow table in canonical form, sorted (no Python datetime conversion in the
    local zone, which fails for year 1: Spark's ``collect`` cannot return 0001-01-01 00:00 UTC).
    `raw_datetimes`: dates and timestamps as integers, for values outside Python's years 1-9999."""
    if raw_datetimes:
        import pyarrow as pa

        table = table.cast(pa.schema([field.with_type(_raw_type(field.type)) for field in table.schema]))
    columns = [
        [_arrow_value(value, field.type) for value in table.column(index).to_pylist()]
        for index, field in enumerate(table.schema)
    ]
    return sorted(zip(*columns, strict=True), key=repr) if columns else []
