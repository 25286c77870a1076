"""How big the Arrow batches are that carry a write's rows from the JVM to its Python tasks, and
what it costs Spark to keep them that size.

Spark 4 cuts those batches (``mapInArrow``, a Python data source's ``write``) at
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default) or at
``spark.sql.execution.arrow.maxBytesPerBatch`` bytes (64 MiB), whichever comes first. To know the
bytes, it measures the batch after every row it adds (``BatchedPythonArrowInput.writeSizedBatch``
calls ``ArrowWriter.sizeInBytes``, which sets the value count of every column vector and adds up
their buffers): about 45 ns per column per row on the project's hosts, whatever the byte limit is,
and most of what moving narrow rows to Python costs (``bench/s3a_writes.py``). Only
``maxBytesPerBatch = Int.MaxValue`` skips it; the batches are then cut by rows alone.

A schema whose every column has a fixed Arrow width (numbers, booleans, dates, timestamps,
day-time intervals, decimals, and structs of them) makes a batch of n rows n times its row width
in bytes, so a row limit of ``BATCH_BYTES // row width`` keeps the same byte bound with no
measurement (`unmeasured_conf`). Strings, binary, arrays, maps and variants can be any size: only
the measurement bounds a batch of them (1 MB rows would otherwise make 10,000-row batches of 10 GB),
except strings the write itself bounds (the partition keys ``write_committed`` adds).

Where the settings go: `write_job_batches` sets them for the one Spark job of a ``write_committed``
(local properties of the calling thread, which executors read as the job's SQL conf), unless the
job also sends other rows to Python (an upstream UDF or ``mapInArrow`` whose input the schema does
not bound: `sends_rows_to_python`). Neither overrides a value the session sets.

A Python data source (``df.write.format("committed")``) gets no such setting of its own: its
``writer()`` runs in a planner process with no session, and the tasks' runner reads its limits
from the task's SQL conf (``UserDefinedPythonDataSource.createMapInBatchEvaluatorFactory``, then
``BasicPythonArrowInput``'s initialiser). ``source_batches`` bounds its batches in the JVM
instead, for the writes of that one source; on Spark Connect, where the client cannot install
that rule, ``register_data_source(spark, unmeasured_arrow_batches=True)`` turns the measurement
off for the whole session (`unmeasure_session`), only when the user asks: every Arrow batch the
session sends to Python is then cut by rows alone, and 1 MB rows exhaust the direct memory of the
JVM that builds the batch, which Spark treats as fatal (``OutOfDirectMemoryError``). A row limit
small enough to hold 1 MB rows to 64 MiB (64 rows) would cost narrow rows more per batch than the
measurement does (bench ``arrow_batches``). The conf ``CommittedSparkSubmitOperator`` gives the
application it submits is that application's session, the same trade, so it sets neither key.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.frames import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger("airflow_commit_provider.spark")

#: The most bytes an Arrow batch to a Python task may hold: Spark's own default for
#: ``maxBytesPerBatch``, kept whether Spark measures the batch or the schema bounds it.
BATCH_BYTES = 64 * 1024**2
#: Spark's default for ``maxRecordsPerBatch`` (a value of 0 or less means no row limit).
SPARK_RECORDS_PER_BATCH = 10_000
#: The ``maxBytesPerBatch`` value at which Spark stops measuring batches (Int.MaxValue).
UNMEASURED = cfg.ARROW_UNMEASURED_BATCHES
#: The package of Spark's physical operators that send rows to Python workers (ArrowEvalPythonExec,
#: MapInArrowExec, FlatMapGroupsInPandasExec, BatchEvalPythonExec, ...).
PYTHON_EXEC_PACKAGE = "org.apache.spark.sql.execution.python."
#: The scan of a cached frame, whose plan runs in the job that first reads it.
CACHED_SCAN_EXEC = "org.apache.spark.sql.execution.columnar.InMemoryTableScanExec"


def max_row_bytes(schema: StructType, bounded_strings: Mapping[str, int] | None = None) -> int | None:
    """The most Arrow bytes one row of `schema` takes in a batch sent to Python, or None when a
    column's size has no bound (string, binary, array, map, variant) or it has no Arrow form.

    `bounded_strings` names top-level string columns whose values the write itself holds to at
    most that many UTF-8 bytes (the partition keys: `frames.PARTITION_VALUE_BYTES`). Counted as
    Spark lays the row out for a Python task: every column inside one struct, each column's values
    and a validity bit (counted as a whole byte, so the figure is never low), a string's offset."""
    import pyarrow as pa

    try:
        arrow = arrow_schema(schema, "UTC")  # a timestamp's width does not depend on its zone
    except Exception:  # a type pyspark cannot carry in Arrow: Spark's measurement decides
        return None
    bounded = bounded_strings or {}
    bits = 8  # the struct holding the row
    for field in arrow:
        if field.name in bounded and pa.types.is_string(field.type):
            # validity, the value's bytes and its offset (8 bytes: large_string's, never less)
            width: int | None = 8 + 8 * (bounded[field.name] + 8)
        else:
            width = _fixed_bits(field.type)
        if width is None:
            return None
        bits += width
    return -(-bits // 8)


def _fixed_bits(arrow_type: Any) -> int | None:
    """Bits per value of a fixed-width Arrow type, with one validity byte per column (struct too)."""
    import pyarrow as pa

    validity = 8
    if pa.types.is_struct(arrow_type):
        widths = [_fixed_bits(arrow_type.field(index).type) for index in range(arrow_type.num_fields)]
        return None if None in widths else validity + sum(w for w in widths if w is not None)
    if pa.types.is_null(arrow_type):
        return 0
    try:
        return validity + arrow_type.bit_width
    except ValueError:  # variable width: strings, binary, lists, maps
        return None


def unmeasured_conf(
    schema: StructType, records_per_batch: int, bounded_strings: Mapping[str, int] | None = None
) -> dict[str, str] | None:
    """The Arrow settings that bound a batch of `schema` to `BATCH_BYTES` without measuring it:
    Spark's measurement off and at most ``BATCH_BYTES // row width`` rows (fewer if
    `records_per_batch` says so); None when only the measurement bounds it."""
    width = max_row_bytes(schema, bounded_strings)
    if width is None:
        return None
    limit = max(1, BATCH_BYTES // max(width, 1))
    rows = min(records_per_batch, limit) if records_per_batch > 0 else limit
    return {cfg.ARROW_MAX_BYTES_PER_BATCH: UNMEASURED, cfg.ARROW_MAX_RECORDS_PER_BATCH: str(rows)}


@contextlib.contextmanager
def write_job_batches(
    df: DataFrame, bounded_strings: Mapping[str, int] | None = None
) -> Iterator[dict[str, str] | None]:
    """For the Spark jobs this thread runs in the block (a ``write_committed``'s one job): Arrow batches of `df`'s
    rows bounded without Spark's per-row measurement when its schema allows it
    (`unmeasured_conf`; `bounded_strings` as for `max_row_bytes`) and its plan sends no other rows
    to Python (`sends_rows_to_python`).

    The settings are local properties of this thread, which Spark hands each task of the job as
    its SQL conf (``ReadOnlySQLConf``) unless the session sets the key itself (its value is then
    propagated instead): concurrent writes in other threads and other jobs of the session keep
    their own. A byte limit the session sets is used as it is; a row limit it sets is kept, and the
    measurement skipped only if that many rows fit in `BATCH_BYTES`. A Spark Connect session (no
    local properties) keeps Spark's measurement. Yields the properties set (None: none)."""
    spark = df.sparkSession
    context = cfg.spark_context(spark)
    conf = None if context is None else _job_conf(spark, df.schema, bounded_strings or {})
    if conf is not None and sends_rows_to_python(df):
        log.debug("Arrow batches measured by Spark: the plan sends other rows to Python, of no known width")
        conf = None
    if conf is None or context is None:
        yield None
        return
    previous = {key: context.getLocalProperty(key) for key in conf}
    for key, value in conf.items():
        context.setLocalProperty(key, value)
    try:
        yield conf
    finally:
        for key, value in previous.items():
            context.setLocalProperty(key, value)


def sends_rows_to_python(df: DataFrame) -> bool:
    """Whether running `df` sends rows to Python anywhere (a Python or pandas UDF, ``mapInArrow``,
    ``applyInPandas``, a UDTF...), including in the plan of a cached frame it reads. Their input
    is not `df`'s schema, so a row limit worked out from `df`'s schema would not bound their
    batches: a job that runs them keeps Spark's measurement. Read from the physical plan, where
    every such operator is a node of ``PYTHON_EXEC_PACKAGE``; a plan that cannot be read counts
    as sending rows."""
    try:
        pending = [df._jdf.queryExecution().sparkPlan()]
        while pending:
            node = pending.pop()
            name = node.getClass().getName()
            if name.startswith(PYTHON_EXEC_PACKAGE):
                return True
            if name == CACHED_SCAN_EXEC:  # a cached frame not yet materialized is computed in this job
                pending.append(node.relation().cachedPlan())
            for nodes in (node.children(), node.subqueries()):
                pending += [nodes.apply(index) for index in range(nodes.size())]
    except Exception:
        log.debug("could not read the physical plan; Spark measures the Arrow batches", exc_info=True)
        return True
    return False


def _job_conf(spark: Any, schema: StructType, bounded_strings: Mapping[str, int]) -> dict[str, str] | None:
    """What `write_job_batches` sets for the job: nothing if the session (or this thread) sets the
    byte limit; only the byte limit if it sets the row limit and those rows fit in `BATCH_BYTES`."""
    if _chosen(spark, cfg.ARROW_MAX_BYTES_PER_BATCH) is not None:
        return None
    records = _chosen(spark, cfg.ARROW_MAX_RECORDS_PER_BATCH)
    conf = unmeasured_conf(
        schema, SPARK_RECORDS_PER_BATCH if records is None else int(records), bounded_strings
    )
    if conf is None or records is None:
        return conf
    if int(records) <= 0 or int(conf[cfg.ARROW_MAX_RECORDS_PER_BATCH]) < int(records):
        return None  # the session's row limit lets batches grow past BATCH_BYTES: Spark measures them
    del conf[cfg.ARROW_MAX_RECORDS_PER_BATCH]  # the session's own row limit is the one propagated
    return conf


def _chosen(spark: Any, key: str) -> str | None:
    """The value the session or this thread's local properties set for `key`, if any."""
    value = spark.conf.get(key, None)
    context = cfg.spark_context(spark)
    if value is None and context is not None:
        value = context.getLocalProperty(key)
    return value


def unmeasure_session(spark: Any) -> None:
    """Turn Spark's per-row batch measurement off for the whole session, as the user asked
    (``register_data_source(spark, unmeasured_arrow_batches=True)``): the way to speed up the data
    source's writes on Spark Connect, where the client cannot install ``source_batches``' rule. Every
    Arrow batch the session sends to Python (``mapInArrow``, pandas UDFs, the data source) is then
    cut at ``maxRecordsPerBatch`` rows alone, whatever its bytes. A value the session sets is kept."""
    current = spark.conf.get(cfg.ARROW_MAX_BYTES_PER_BATCH, None)
    if current is not None:
        log.info("the session sets %s=%s; left as it is", cfg.ARROW_MAX_BYTES_PER_BATCH, current)
        return
    records = int(spark.conf.get(cfg.ARROW_MAX_RECORDS_PER_BATCH, None) or SPARK_RECORDS_PER_BATCH)
    spark.conf.set(cfg.ARROW_MAX_BYTES_PER_BATCH, UNMEASURED)
    widest = f"{BATCH_BYTES // records:,} bytes" if records > 0 else "any size"
    log.warning(
        "set %s=%s in this session, as asked: Spark no longer measures the Arrow batches it sends to "
        "Python (mapInArrow, pandas UDFs, df.write.format('committed')) and cuts them at %s=%d rows "
        "alone, so rows wider than %s make batches above %d MiB (1 MB rows: %d MB each, enough to "
        "exhaust an executor's direct memory); unset the key to measure again",
        cfg.ARROW_MAX_BYTES_PER_BATCH,
        UNMEASURED,
        cfg.ARROW_MAX_RECORDS_PER_BATCH,
        records,
        widest,
        BATCH_BYTES // 1024**2,
        records,
    )
