"""Which Spark types each format writes as Spark's own writer would; the others are refused on the
driver, before any work, with the column, its type and the reason.

The refusals are Spark's own (its writers refuse them too: ``UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE``,
``UNSUPPORTED_TIME_TYPE``) plus one of ours: year-month intervals in parquet and orc, whose Arrow
form (``INTERVAL_MONTHS``) pyarrow cannot hold, so they never reach a task's writer. Everything
else - every atomic type, nested arrays, maps and structs, day-time intervals, ``void`` in parquet
and json, ``variant`` in parquet and json - is written so that ``spark.read`` returns what it
returns from ``df.write`` (checked by tests/spark/test_fidelity.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_NOT_IN_FILES = "Spark's file writers refuse it too"


def _refusal(data_type: Any, fmt: str) -> str | None:
    """Why a value of exactly this type (not its children) cannot be written in `fmt`, or None."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.CalendarIntervalType):
        return _NOT_IN_FILES
    if isinstance(data_type, getattr(T, "AnyTimeType", ())):
        return _NOT_IN_FILES
    if isinstance(data_type, (getattr(T, "GeometryType", ()), getattr(T, "GeographyType", ()))):
        return "spatial types are not supported by these writers"
    if isinstance(data_type, T.YearMonthIntervalType) and fmt in ("parquet", "orc"):
        return "pyarrow has no year-month interval type to carry it (write json or csv, or cast it to months)"
    if isinstance(data_type, T.VariantType) and fmt in ("orc", "csv"):
        return f"Spark's {fmt} writer refuses it too"
    if isinstance(data_type, T.NullType) and fmt in ("orc", "csv"):
        return f"Spark's {fmt} writer refuses it too"
    if isinstance(data_type, (T.ArrayType, T.MapType, T.StructType)) and fmt == "csv":
        return "csv holds atomic values only; Spark's csv writer refuses it too"
    return None


def _walk(data_type: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, type) of `data_type` and of every type nested in it (a UDT is its SQL type)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.UserDefinedType):
        yield from _walk(data_type.sqlType(), path)
        return
    yield path, data_type
    if isinstance(data_type, T.StructType):
        for field in data_type.fields:
            yield from _walk(field.dataType, f"{path}.{field.name}")
    elif isinstance(data_type, T.ArrayType):
        yield from _walk(data_type.elementType, f"{path}[]")
    elif isinstance(data_type, T.MapType):
        yield from _walk(data_type.keyType, f"{path}.key")
        yield from _walk(data_type.valueType, f"{path}.value")


def refuse_unfaithful_types(schema: Any, fmt: str) -> None:
    """Raise ValueError naming the first column (or nested field) of `schema` (a StructType of the
    data columns) that `fmt` cannot be written faithfully with."""
    for field in schema.fields:
        for path, data_type in _walk(field.dataType, field.name):
            reason = _refusal(data_type, fmt)
            if reason is not None:
                raise ValueError(
                    f"column {path!r} ({data_type.simpleString()}) cannot be written as {fmt} faithfully: {reason}"
                )


def contains_type(data_type: Any, kind: type) -> bool:
    """Whether `data_type` is or holds (nested) a type of class `kind`."""
    return any(isinstance(nested, kind) for _, nested in _walk(data_type, ""))
