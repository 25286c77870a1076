"""ORC files laid out as Spark's own ORC writer lays them out, so ``spark.read.orc`` returns what it
returns from ``df.write.orc`` of the same DataFrame.

Spark's writer (``OrcSerializer``, ``OrcUtils.orcTypeDescription``, Spark 4.x) differs from pyarrow's
ORC writer in four ways; each batch is brought to Spark's layout before pyarrow writes it:

- **Type attributes.** ``timestamp_ntz`` and day-time intervals are ORC ``bigint`` (microseconds),
  tagged with the attribute ``spark.sql.catalyst.type`` (``timestamp_ntz``, ``interval day to
  second``...), from which Spark's reader (``OrcUtils.toCatalystSchema``) takes the Spark type back;
  ``timestamp`` and ``string`` carry the tag too. pyarrow writes an Arrow field's metadata as the
  ORC type's attributes. Without the tag a ``timestamp_ntz`` came back as ``timestamp``.
  One difference remains, on purpose: ``timestamp`` is an ORC ``timestamp with local time zone``
  (an instant), where Spark writes an ORC ``timestamp`` (a wall clock in the writing JVM's zone,
  which it records). pyarrow's writer records GMT for the latter, so a JVM in another zone would
  read our wall clocks shifted by its offset; the instant reads back the same in every zone, and
  the tag makes Spark read it as ``timestamp`` either way.
- **Calendar.** Spark stores dates and timestamps in the hybrid Julian+Gregorian calendar
  (``DaysWritable``, ``DateTimeUtils.toJavaTimestamp``) and its reader rebases them back
  (``OrcAtomicColumnVector``): before 1582-10-15 the stored day numbers are not the proleptic ones
  (and 1582-10-05..14, which the hybrid calendar lacks, become 1582-10-15), and timestamps before
  about 1900 move by the JVM default time zone's historical offsets. We rebase exactly as Spark's
  ``RebaseDateTime`` does, with its own tables (``timestamp_rebase`` reads them from Spark's jar).
  ``timestamp_ntz`` is stored as plain microseconds and is not rebased, as in Spark.
- **Timestamp encoding.** Arrow's ORC adapter splits microseconds into seconds and nanoseconds by
  truncation, so a timestamp before 1970 with a fraction of a second gets negative nanoseconds,
  which Java's ORC reader rejects ("nanos > 999999999 or < 0"). Those values cannot be written
  (``UnwritableValueError`` names the column and value) - except in the last second before 1970
  with at least a millisecond fraction, which Java's ORC writer itself stores as that fraction
  after the epoch (Spark reads 1969-12-31 23:59:59.5 back as 1970-01-01 00:00:00.5): we store the
  same.
- **Map order.** Spark's ``OrcMap`` is a ``TreeMap``: map entries are stored sorted by key.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: The ORC type attribute Spark's reader takes the Spark type from (OrcUtils.CATALYST_TYPE_ATTRIBUTE_NAME).
CATALYST_TYPE_ATTRIBUTE = "spark.sql.catalyst.type"
#: Spark's table of Gregorian->Julian switches per time zone, inside its spark-sql-api jar.
_REBASE_RESOURCE = "gregorian-julian-rebase-micros.json"
_MICROS_PER_SECOND = 1_000_000

# RebaseDateTime.gregJulianDiffSwitchDay / gregJulianDiffs (days since 1970-01-01): from 0001-01-01
# to 1582-10-15, the difference between a proleptic Gregorian day number and the hybrid calendar's.
_GREG_JULIAN_SWITCH_DAYS = (
    -719162, -682944, -646420, -609896, -536847, -500323, -463799, -390750, -354226, -317702,
    -244653, -208129, -171605, -141436, -141435, -141434, -141433, -141432, -141431, -141430,
    -141429, -141428, -141427,
)  # fmt: skip
_GREG_JULIAN_DIFF_DAYS = (-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)


class UnwritableValueError(ValueError):
    """A value of the batch cannot be stored so that Spark reads it back as Spark's writer would."""


@dataclass(frozen=True)
class TimestampRebase:
    """How Spark's ORC writer rebases timestamps in one JVM time zone (RebaseDateTime's table)."""

    zone: str
    switches: tuple[int, ...]
    """Microseconds since the epoch where the difference changes (empty: zone not in Spark's table)."""
    diffs: tuple[int, ...]
    """Microseconds added from each switch on."""
    last_switch: int
    """From here on no zone rebases (RebaseDateTime.lastSwitchGregorianTs)."""


def spark_jars_dir() -> str | None:
    """The jars of the Spark this PySpark runs (SPARK_HOME's, else the pyspark package's)."""
    import pyspark

    for candidate in (os.environ.get("SPARK_HOME"), os.path.dirname(pyspark.__file__)):
        if candidate and glob.glob(os.path.join(candidate, "jars", "spark-sql-api_*.jar")):
            return os.path.join(candidate, "jars")
    return None


@functools.lru_cache(maxsize=8)
def timestamp_rebase(zone: str) -> TimestampRebase:
    """Spark's own rebase table for `zone`, read from its spark-sql-api jar (on the driver)."""
    jars = spark_jars_dir()
    if jars is None:
        raise RuntimeError("cannot find Spark's jars (spark-sql-api_*.jar) for its ORC rebase table")
    jar = sorted(glob.glob(os.path.join(jars, "spark-sql-api_*.jar")))[-1]
    with zipfile.ZipFile(jar) as archive:
        records = json.loads(archive.read(_REBASE_RESOURCE))
    last_switch = max(record["switches"][-1] for record in records) * _MICROS_PER_SECOND
    for record in records:
        if record["tz"] == zone:
            return TimestampRebase(
                zone,
                tuple(second * _MICROS_PER_SECOND for second in record["switches"]),
                tuple(second * _MICROS_PER_SECOND for second in record["diffs"]),
                last_switch,
            )
    return TimestampRebase(zone, (), (), last_switch)


def process_time_zone() -> str:
    """The default time zone a JVM started from this process's environment gets (TZ, else the
    /etc/localtime link, else /etc/timezone), for writers that cannot ask the JVM."""
    configured = os.environ.get("TZ", "").lstrip(":")
    if configured:
        return configured
    try:
        target = os.path.realpath("/etc/localtime")
        if "/zoneinfo/" in target:
            return target.split("/zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        with open("/etc/timezone", encoding="utf-8") as handle:
            return handle.read().strip() or "UTC"
    except OSError:
        return "UTC"


# Spark types, as Spark's schema JSON spells them: "date", "timestamp", {"type": "struct", ...}.
def _kind(spark_type: Any) -> str:
    if isinstance(spark_type, dict):
        kind = spark_type["type"]
        return "udt" if kind == "udt" else kind
    return str(spark_type)


def needs_layout(spark_type: Any) -> bool:
    """Whether a column of this Spark type is stored differently from pyarrow's default."""
    kind = _kind(spark_type)
    if kind == "struct":
        return any(needs_layout(field["type"]) for field in spark_type["fields"])
    if kind == "array":
        return needs_layout(spark_type["elementType"])
    if kind == "map":
        return True
    if kind == "udt":
        return needs_layout(spark_type["sqlType"])
    return kind in ("date", "timestamp", "timestamp_ntz") or kind.startswith(("string", "interval"))


def to_spark_layout(
    batch: pa.RecordBatch, fields: Sequence[dict[str, Any]], rebase: TimestampRebase | None
) -> pa.RecordBatch:
    """`batch` (the data columns, in the order of Spark's `fields`) as Spark's ORC writer stores it."""
    arrays, arrow_fields = [], []
    for array, arrow_field, field in zip(batch.columns, batch.schema, fields, strict=True):
        if needs_layout(field["type"]):
            array, metadata = _convert(array, field["type"], field["name"], rebase)
            arrow_field = pa.field(arrow_field.name, array.type, arrow_field.nullable, metadata)
        arrays.append(array)
        arrow_fields.append(arrow_field)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(arrow_fields, metadata=batch.schema.metadata))


def _tag(spark_kind: str) -> dict[str, str]:
    return {CATALYST_TYPE_ATTRIBUTE: spark_kind}


def _convert(
    array: pa.Array, spark_type: Any, path: str, rebase: TimestampRebase | None
) -> tuple[pa.Array, dict[str, str] | None]:
    """(the array as stored, the ORC attributes of its type)."""
    kind = _kind(spark_type)
    if kind == "udt":
        return _convert(array, spark_type["sqlType"], path, rebase)
    if kind == "date":
        return _rebase_days(array, path), None
    if kind == "timestamp":
        return _spark_timestamps(array, path, rebase), _tag("timestamp")
    if kind == "timestamp_ntz":
        return array.cast(pa.int64()), _tag("timestamp_ntz")
    if kind.startswith("interval"):  # day-time intervals (year-month ones are refused before work)
        return array.cast(pa.int64()), _tag(kind)
    if kind.startswith("string"):
        return array, _tag("string")
    if kind == "struct":
        return _convert_struct(array, spark_type, path, rebase), None
    if kind == "array":
        return _convert_list(array, spark_type, path, rebase), None
    if kind == "map":
        return _convert_map(array, spark_type, path, rebase), None
    return array, None


def _child_field(name: str, spark_type: Any, array: pa.Array, nullable: bool, path: str, rebase: Any):
    if needs_layout(spark_type):
        array, metadata = _convert(array, spark_type, path, rebase)
    else:
        metadata = None
    return array, pa.field(name, array.type, nullable, metadata)


def _convert_struct(array: pa.StructArray, spark_type: dict, path: str, rebase: Any) -> pa.Array:
    children, fields = [], []
    for index, (arrow_field, field) in enumerate(zip(array.type, spark_type["fields"], strict=True)):
        child, child_field = _child_field(
            arrow_field.name,
            field["type"],
            array.field(index),
            arrow_field.nullable,
            f"{path}.{field['name']}",
            rebase,
        )
        children.append(child)
        fields.append(child_field)
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _entries(array: pa.Array) -> tuple[pa.Array, int, int]:
    """(relative offsets, first entry, entry count) of a possibly sliced list or map array."""
    offsets = array.offsets
    first = offsets[0].as_py()
    count = offsets[len(offsets) - 1].as_py() - first
    return pc.subtract(offsets, pa.scalar(first, offsets.type)), first, count


def _convert_list(array: pa.ListArray, spark_type: dict, path: str, rebase: Any) -> pa.Array:
    offsets, first, count = _entries(array)
    element_field = array.type.value_field
    values, field = _child_field(
        element_field.name,
        spark_type["elementType"],
        array.values.slice(first, count),
        element_field.nullable,
        f"{path}[]",
        rebase,
    )
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(offsets, values, type=pa.list_(field), mask=mask)


def _convert_map(array: pa.MapArray, spark_type: dict, path: str, rebase: Any) -> pa.Array:
    offsets, first, count = _entries(array)
    keys = array.keys.slice(first, count)
    items = array.items.slice(first, count)
    if count and _sortable(keys.type):
        # OrcMap is a TreeMap: entries by key, within each map (Hadoop's Writables compare as Arrow sorts).
        import numpy as np

        lengths = np.diff(offsets.to_numpy(zero_copy_only=False))
        owners = pa.array(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths))
        order = pc.sort_indices(
            pa.table({"owner": owners, "key": keys}), sort_keys=[("owner", "ascending"), ("key", "ascending")]
        )
        keys, items = keys.take(order), items.take(order)
    key_field, item_field = array.type.key_field, array.type.item_field
    keys, new_key_field = _child_field(
        key_field.name, spark_type["keyType"], keys, False, f"{path}.key", rebase
    )
    items, new_item_field = _child_field(
        item_field.name, spark_type["valueType"], items, item_field.nullable, f"{path}.value", rebase
    )
    mask = array.is_null() if array.null_count else None
    return pa.MapArray.from_arrays(
        offsets, keys, items, type=pa.map_(new_key_field, new_item_field), mask=mask
    )


def _sortable(arrow_type: pa.DataType) -> bool:
    return not (pa.types.is_nested(arrow_type) or pa.types.is_dictionary(arrow_type))


def _rebase_days(array: pa.Array, path: str) -> pa.Array:
    """RebaseDateTime.rebaseGregorianToJulianDays, vectorised (DaysWritable stores these)."""
    days = array.cast(pa.int32())
    low = pc.min(days).as_py()
    if low is None or low >= _GREG_JULIAN_SWITCH_DAYS[-1]:
        return array
    if low < _GREG_JULIAN_SWITCH_DAYS[0]:
        first = pc.index(pc.less(days, _GREG_JULIAN_SWITCH_DAYS[0]), True).as_py()
        raise UnwritableValueError(
            f"column {path!r}: date {array[first]} (before 0001-01-01) cannot be written as orc "
            "faithfully: Spark's ORC writer rebases it to the Julian calendar in a way not reproduced here"
        )
    return _add_diffs(days, _GREG_JULIAN_SWITCH_DAYS, _GREG_JULIAN_DIFF_DAYS).cast(pa.date32())


def _add_diffs(values: pa.Array, switches: Sequence[int], diffs: Sequence[int]) -> pa.Array:
    """RebaseDateTime.rebaseDays/rebaseMicros: value + the diff of the last switch at or before it
    (values at or after the last switch are unchanged: its diff is 0)."""
    scalar_type = values.type
    result = values
    for switch, diff, next_switch in zip(switches, diffs, (*switches[1:], None), strict=True):
        if diff == 0:
            continue
        inside = pc.greater_equal(values, pa.scalar(switch, scalar_type))
        if next_switch is not None:
            inside = pc.and_(inside, pc.less(values, pa.scalar(next_switch, scalar_type)))
        result = pc.if_else(inside, pc.add(values, pa.scalar(diff, scalar_type)), result)
    return result


def _spark_timestamps(array: pa.Array, path: str, rebase: TimestampRebase | None) -> pa.Array:
    """UTC microseconds as Spark's ORC writer stores them (rebased to the hybrid calendar in the
    JVM's zone), as an instant (see the module doc)."""
    micros = array.cast(pa.int64())
    low = pc.min(micros).as_py()
    if low is not None and low < 0:
        if rebase is not None and low < rebase.last_switch:
            micros = _rebase_micros(micros, path, rebase)
        micros = _java_orc_seconds(micros, array, path)
    return micros.cast(pa.timestamp("us", tz="UTC"))


def _rebase_micros(micros: pa.Array, path: str, rebase: TimestampRebase) -> pa.Array:
    """RebaseDateTime.rebaseGregorianToJulianMicros(zone, micros), from Spark's table for the zone."""
    if not rebase.switches or pc.min(micros).as_py() < rebase.switches[0]:
        before = rebase.switches[0] if rebase.switches else rebase.last_switch
        first = pc.index(pc.less(micros, before), True).as_py()
        raise UnwritableValueError(
            f"column {path!r}: timestamp {_iso(micros[first].as_py())} cannot be written as orc faithfully: "
            f"Spark rebases it to the Julian calendar in time zone {rebase.zone!r}, which Spark's "
            "rebase table does not cover"
        )
    return _add_diffs(micros, rebase.switches, rebase.diffs)


def _java_orc_seconds(micros: pa.Array, written: pa.Array, path: str) -> pa.Array:
    """Values Arrow's ORC adapter splits as Java's ORC writer does; refuse the others (see module doc)."""
    second = pa.scalar(_MICROS_PER_SECOND, pa.int64())
    whole = pc.equal(pc.multiply(pc.divide(micros, second), second), micros)  # divide truncates
    fractional_before_epoch = pc.and_(pc.less(micros, 0), pc.invert(whole))
    if not pc.any(fractional_before_epoch).as_py():
        return micros
    # Java stores (0 s, fraction) for the last second before the epoch when the fraction has a
    # millisecond or more: that is the fraction after the epoch when read, here and in Spark.
    last_second = pc.and_(fractional_before_epoch, pc.greater_equal(micros, -_MICROS_PER_SECOND + 1000))
    shifted = pc.if_else(last_second, pc.add(micros, second), micros)
    unwritable = pc.and_(fractional_before_epoch, pc.invert(last_second))
    if pc.any(unwritable).as_py():
        first = pc.index(unwritable, True).as_py()
        raise UnwritableValueError(
            f"column {path!r}: timestamp {written[first]} cannot be written as orc faithfully: "
            "pyarrow's ORC writer cannot store a time before 1970 with a fraction of a second "
            "(write parquet, or truncate it to whole seconds)"
        )
    return shifted


def _iso(micros: int) -> str:
    import datetime as dt

    try:
        moment = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
        return moment.isoformat()
    except OverflowError:
        return f"{micros} µs since 1970-01-01 UTC"
