"""``df.write.format("committed")``: our commit protocol run by Spark's own write path.

A Python data source (Spark 4, ``pyspark.sql.datasource``) named ``committed``::

    register_data_source(spark)
    (df.write.format("committed").mode("overwrite")
       .option("committer", "partitioned").option("partition_by", "dt")
       .save("s3://lake/warehouse/events"))

Spark runs it as a DataSource V2 batch write, and each step is one step of our protocol:

- ``CommittedDataSource.writer(schema, overwrite)`` (driver side, once): plans the write with
  ``plan_write`` (committer from the registry, conflict handling, job ID, options) and sets up the
  job. ``mode("append")`` is ``conflict_mode="append"``, ``mode("overwrite")`` is ``"replace"``:
  only the partitions written are replaced with the ``partitioned`` committer, the whole
  destination with ``directory``; a committer that cannot replace is refused, as by
  ``write_committed``. The option ``conflict_mode="fail"`` with ``append`` refuses existing output.
- ``CommittedWriter.write(batches)`` (each task): one task attempt, numbered by the task's
  ``TaskContext`` (partition ID; ``taskAttemptId()`` for the attempt, so retries and speculative
  duplicates are distinct attempts), written and committed by ``tasks.run_task_attempt`` (Spark's
  file names, partition escaping, rolling files, formats); it returns the attempt's outcome.
- ``commit(messages)``: commits the job with exactly the results in the messages Spark accepted.
  A failure past the commit point is rolled forward (the output is complete) and ``save`` returns.
- ``abort(messages)``: aborts the job (every upload and temp file goes); a job already past its
  commit point is rolled forward instead, and the log says so.

``save`` returns nothing; the summary is in ``_SUCCESS`` and the job record
``_airflow_commit/<job id>.success.json``.

**Tables.** ``option("table", "db.events")`` instead of a path writes a catalog table through a
Thrift Hive metastore (``core.hive_metastore_catalog``), named by ``option("metastore_uri",
"thrift://host:9083")`` or else by the ``spark.hadoop.hive.metastore.uris`` of the session that
registered the source. ``writer()`` takes the location, format and partition columns from the
metastore and refuses a DataFrame that does not fit (``core.table_checks``, as ``write_committed``);
``commit()`` registers the partitions written after the commit point. If that fails the data stays
committed, the record says registration is pending and the write fails naming
``finish_table_write``.

**Where each part runs.** ``writer()`` and ``commit()``/``abort()`` run in Python workers that the
driver starts (on Spark Connect, the server's driver); the writer object is pickled from one to the
others and to the tasks, so it carries the plan and the task config, never a store. Those workers
have no SparkSession: settings come from the write's options only (``spark.airflow_commit.*`` confs
do not apply; pass ``job_id``, ``committer``... as options), and S3 settings not given as
``s3.*`` options come from the driver's environment (on Spark Connect, the server's).

**Differences from** ``write_committed``, from what a Python data source is given: partition
columns come as the ``partition_by`` option (comma-separated; Spark refuses ``partitionBy`` for
Python data sources), and must be strings, integers, dates or booleans (their directory names are
computed in the task by Arrow, which spells those types as Spark does; cast others to string first).
Spark cannot be asked to sort a Python data source's input (``PythonWrite`` does not implement
``RequiresDistributionAndOrdering``), so each task sorts each Arrow batch by partition values: one
file per partition directory per batch, fewer with ``df.sortWithinPartitions(*partition_by)``
first (then each batch is already in order and is not sorted again). Formats: ``parquet`` and ``orc`` (csv and json rows are encoded by Spark's own functions in
``write_committed``, which a data source cannot call). Compression defaults to Spark's defaults.
Column types are checked as in ``write_committed`` (``type_support``); for orc, the JVM time zone
whose calendar table Spark's ORC writer rebases old timestamps with is taken from this worker's
environment (``orc_layout.process_time_zone``): there is no session to ask.

**Arrow batches.** Spark sends the rows to ``write()`` in Arrow batches of at most
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000) and 64 MiB. To know the bytes it
measures each batch after every row, which keeps wide rows safe and costs narrow rows most of their
transfer time, and a data source has no setting of its own to change that. ``register_data_source``
installs a Spark optimizer rule in a classic session (``source_batches``) that cuts this source's
batches by their rows' bytes in the JVM instead, without the per-row measurement, and logs that it
did; the session's other queries and writes are unchanged, and a ``maxBytesPerBatch`` the session
sets is kept. On Spark Connect the client cannot install it: there
``register_data_source(spark, unmeasured_arrow_batches=True)`` turns the measurement off for the
whole session, for users who know no rows are wide.

**Spark's output commit coordinator** applies, and adds nothing to the exclusive task commit.
Spark's ``PythonBatchWrite`` keeps ``BatchWrite.useCommitCoordinator()``'s default (true), so
``DataWritingSparkTask`` asks ``OutputCommitCoordinator.canCommit(stage, stageAttempt, partition,
attemptNumber)`` before ``DataWriter.commit()``. For a Python data source that call only hands
back the message ``write()`` returned, and our task commit already happened inside ``write()``:
the coordinator decides which attempt's message reaches the driver (at most one per partition; a
denied duplicate fails with ``CommitDeniedException``, which is not counted as a task failure), not
which attempt's files are committed. The committers do that themselves: the first attempt to commit
wins and later attempts of the same task adopt its result (``exclusive_task_commit``), so whichever
message the coordinator lets through names the same files. The committers whose last attempt wins
(``file-v1``, ``file-v2``) get no protection from the coordinator here either.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from airflow_commit_provider.core.catalog import CatalogError, TableInfo, TableNotFoundError
from airflow_commit_provider.core.committers import TaskCommitResult
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.hive_metastore_catalog import HiveMetastoreCatalog
from airflow_commit_provider.core.table_checks import check_write
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.arrow_batches import unmeasure_session
from airflow_commit_provider.spark.formats import file_format
from airflow_commit_provider.spark.frames import (
    HIDDEN_PREFIX,
    PARTITION_VALUE_BYTES,
    empty_file_schema,
    partition_value_too_long,
    resolve_partition_columns,
)
from airflow_commit_provider.spark.orc_layout import process_time_zone, timestamp_rebase
from airflow_commit_provider.spark.source_batches import bound_source_batches
from airflow_commit_provider.spark.tables import schema_columns
from airflow_commit_provider.spark.task_config import TaskConfig
from airflow_commit_provider.spark.task_info import current_task_info
from airflow_commit_provider.spark.tasks import TaskOutcome, run_task_attempt
from airflow_commit_provider.spark.type_support import contains_type, refuse_unfaithful_types
from airflow_commit_provider.spark.write_plan import SparkWritePlan, plan_write
from airflow_commit_provider.spark.writer import (
    abort_after_failure,
    finish_job,
    open_committer,
    register_after_commit,
    set_up_job,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "SHORT_NAME",
    "CommittedDataSource",
    "CommittedTaskMessage",
    "CommittedWriter",
    "register_data_source",
]

log = logging.getLogger("airflow_commit_provider.spark")

#: The name ``df.write.format(...)`` takes.
SHORT_NAME = "committed"
#: Options the data source reads itself; every other option is a ``write_committed`` option.
SOURCE_OPTIONS = (
    "path",
    "table",
    "metastore_uri",
    "format",
    "committer",
    "partition_by",
    "conflict_mode",
    "job_id",
)
#: Formats whose rows a task can write from Arrow batches as they come.
SOURCE_FORMATS = ("parquet", "orc")
#: Spark's defaults for ``spark.sql.parquet.compression.codec`` and ``spark.sql.orc.compression.codec``
#: (a data source cannot read the session's conf; the ``compression`` option overrides them).
SPARK_DEFAULT_CODECS = {"parquet": "snappy", "orc": "zstd"}
#: Spark types whose string form Arrow's cast spells exactly as Spark's cast (partition values).
PARTITION_TYPES = ("string", "tinyint", "smallint", "int", "bigint", "date", "boolean")


def register_data_source(spark: SparkSession, *, unmeasured_arrow_batches: bool = False) -> None:
    """Make ``df.write.format("committed")`` available in ``spark``, a classic or Spark Connect
    session. Idempotent: registering again replaces the registration.

    A session whose catalog is a Thrift metastore (``spark.hadoop.hive.metastore.uris``) registers a
    source that writes its tables (``option("table", ...)``) through that metastore by default:
    the source's driver side runs without a session, so the URI travels in the class.

    In a classic session it also installs the rule that sends this source's rows to its tasks in
    Arrow batches bounded in the JVM, without Spark's per-row measurement (``source_batches``), and
    logs that it did: the session's other queries and writes are unchanged.

    ``unmeasured_arrow_batches=True`` is for Spark Connect, where the client cannot install that
    rule: it turns Spark's per-row Arrow batch measurement off for the whole session, unless the
    session sets ``spark.sql.execution.arrow.maxBytesPerBatch`` itself, and logs a warning saying
    so. Batches are then cut at ``maxRecordsPerBatch`` rows alone, for every Arrow batch the session
    sends to Python; leave it off if any rows may be wide (1 MB rows make 10 GB batches at Spark's
    default 10,000 rows).
    """
    if unmeasured_arrow_batches:
        unmeasure_session(spark)
    bound_source_batches(spark, SHORT_NAME)
    uris = spark.conf.get(cfg.METASTORE_URIS, None)
    if not uris:
        spark.dataSource.register(CommittedDataSource)
        return
    spark.dataSource.register(
        type(CommittedDataSource.__name__, (CommittedDataSource,), {"session_metastore_uris": uris})
    )


class CommittedDataSource(DataSource):
    """The ``committed`` data source: write-only, batch only."""

    #: The Thrift metastore of the session that registered the source (`register_data_source`).
    session_metastore_uris: str | None = None

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def writer(self, schema: StructType, overwrite: bool) -> CommittedWriter:
        """Plan the write and set up its job (on the driver, once per write)."""
        options = dict(self.options)
        if self.session_metastore_uris and "metastore_uri" not in {key.lower() for key in options}:
            options["metastore_uri"] = self.session_metastore_uris
        plan, task_config, catalog = plan_source_write(options, schema, overwrite)
        job = open_committer(plan)
        try:
            set_up_job(job, plan, description="df.write.format('committed')")
        finally:
            job.store.close()
        return CommittedWriter(plan, task_config, catalog)


@dataclass(frozen=True)
class CommittedTaskMessage(WriterCommitMessage):
    """What one task attempt reports: its committed result (None if it wrote nothing) and counts."""

    outcome: TaskOutcome


class CommittedWriter(DataSourceArrowWriter):
    """Carries the plan from the driver to the tasks and to job commit or abort (pickled)."""

    def __init__(self, plan: SparkWritePlan, task_config: TaskConfig, catalog: HiveMetastoreCatalog | None):
        self.plan = plan
        self.task_config = task_config
        self.catalog = catalog
        """Where a table write registers its partitions (None for a path write)."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommittedTaskMessage:
        """One task attempt: write its rows and commit it (in the task)."""
        batches = (_with_partition_keys(self.task_config, batch) for batch in iterator)
        return CommittedTaskMessage(run_task_attempt(self.task_config, current_task_info(), batches))

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Commit the job with exactly the attempts Spark accepted; past the commit point a failure
        is rolled forward, so ``save`` returns with the output complete."""
        results = committed_results(messages)
        job = open_committer(self.plan)
        try:
            try:
                success = job.commit_job(results)
            except Exception as error:
                completed = abort_after_failure(job, f"{type(error).__name__}: {error}")
                if completed is None:
                    raise
                success = completed
                log.warning(
                    "job %s had passed its commit point when its commit failed (%s); abort completed it",
                    job.job_id,
                    error,
                )
            log.info(
                "job %s: committed %s files, %s bytes, %s rows to %s",
                job.job_id,
                success.file_count,
                success.total_bytes,
                success.rows,
                self.plan.destination,
            )
        finally:
            finish_job(job)
        self._register(success)

    def _register(self, success: SuccessData) -> None:
        """After the commit point: register a table write's partitions through the metastore. A
        failure leaves the data committed and the record saying registration is pending, and fails
        the write naming ``finish_table_write``, as ``write_committed`` does."""
        if self.catalog is not None:
            register_after_commit(self.catalog, self.plan, success)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Abort the job after a failed task or commit; a job past its commit point is completed."""
        job = open_committer(self.plan)
        try:
            failed = sum(1 for message in messages if message is None)
            success = abort_after_failure(job, f"Spark aborted the write ({failed} tasks without a result)")
            if success is not None:
                log.warning(
                    "job %s had passed its commit point: abort completed the commit (%s files in %s)",
                    job.job_id,
                    success.file_count,
                    self.plan.destination,
                )
        finally:
            finish_job(job)
        if success is not None:
            try:
                self._register(success)
            except CatalogError as error:  # the write fails anyway: say why registration waits
                log.warning("%s", error)


def committed_results(messages: Iterable[WriterCommitMessage | None]) -> list[TaskCommitResult]:
    """The committed task results in Spark's messages (tasks that wrote nothing have none)."""
    results = []
    for message in messages:
        if not isinstance(message, CommittedTaskMessage):
            raise TypeError(f"not a message of the {SHORT_NAME!r} data source: {message!r}")
        if message.outcome.result is not None:
            results.append(message.outcome.result)
    return results


def plan_source_write(
    options: Mapping[str, str], schema: StructType, overwrite: bool
) -> tuple[SparkWritePlan, TaskConfig, HiveMetastoreCatalog | None]:
    """The write's plan (``plan_write``), the config its tasks receive and, for a table, the
    metastore its partitions are registered in; ValueError names what is wrong (an unknown
    option, a format, a partition column, a mode the committer cannot honour, a table the
    DataFrame does not fit)."""
    remaining = {key.lower(): value for key, value in options.items()}
    source = {key: remaining.pop(key) for key in SOURCE_OPTIONS if key in remaining}
    catalog = None
    if source.get("table"):
        catalog, table = _table_destination(source, schema)
        source.update(
            path=str(table.location), format=table.format, partition_by=",".join(table.partition_columns)
        )
    elif "metastore_uri" in source:
        raise ValueError(f"data source {SHORT_NAME!r}: metastore_uri is for option('table', ...)")
    path = source.get("path")
    if not path:
        raise ValueError(
            f"data source {SHORT_NAME!r} needs a destination: save(path) or option('table', ...)"
        )
    fmt = source.get("format", "parquet").lower()
    if fmt not in SOURCE_FORMATS:
        raise ValueError(
            f"data source {SHORT_NAME!r} writes {' or '.join(SOURCE_FORMATS)}, not format={fmt!r}; "
            "write_committed writes csv and json"
        )
    names = schema.fieldNames()
    clash = [name for name in names if name.startswith(HIDDEN_PREFIX)]
    if clash:
        raise ValueError(f"column names starting with {HIDDEN_PREFIX!r} are reserved: {clash}")
    requested = [column.strip() for column in source.get("partition_by", "").split(",") if column.strip()]
    partition_columns = resolve_partition_columns(names, requested)
    for column in partition_columns:
        type_name = schema[column].dataType.simpleString()
        if type_name not in PARTITION_TYPES:
            raise ValueError(
                f"partition column {column!r} has type {type_name}; data source {SHORT_NAME!r} "
                f"partitions by {', '.join(PARTITION_TYPES)} (cast it to string first)"
            )
    data_schema = _data_schema(schema, partition_columns)
    try:
        refuse_unfaithful_types(data_schema, fmt)
    except ValueError as error:
        raise ValueError(f"data source {SHORT_NAME!r}: {error}") from None
    try:
        plan = plan_write(
            path,
            conf={cfg.CONF_JOB_ID: source["job_id"]} if source.get("job_id") else {},
            format=fmt,
            partition_by=partition_columns,
            committer=source.get("committer"),
            conflict_mode=_conflict_mode(overwrite, source.get("conflict_mode")),
            options=remaining,
            table=source.get("table"),
        )
    except ValueError as error:
        raise ValueError(
            f"data source {SHORT_NAME!r}: {error} (its own options: {', '.join(SOURCE_OPTIONS)})"
        ) from None
    return plan, _task_config(plan, data_schema, partition_columns), catalog


def _table_destination(
    source: Mapping[str, str], schema: StructType
) -> tuple[HiveMetastoreCatalog, TableInfo]:
    """The metastore and the table a table write goes to, once `schema` and the ``format`` and
    ``partition_by`` options given are checked against the table (before any work)."""
    table = source["table"]
    if source.get("path"):
        raise ValueError(
            f"data source {SHORT_NAME!r}: pass save(path) or option('table', {table!r}), not both"
        )
    uris = source.get("metastore_uri")
    if not uris:
        raise ValueError(
            f"data source {SHORT_NAME!r} writes table {table!r} through a Thrift metastore: pass "
            f"option('metastore_uri', 'thrift://host:9083') or register it in a session with {cfg.METASTORE_URIS}"
        )
    try:
        catalog = HiveMetastoreCatalog(uris)
        info = catalog.table_info(table)
    except TableNotFoundError as error:
        raise TableNotFoundError(f"data source {SHORT_NAME!r}: {error}") from None
    except ValueError as error:
        raise ValueError(f"data source {SHORT_NAME!r}: {error}") from None
    requested = [column.strip() for column in source.get("partition_by", "").split(",") if column.strip()]
    try:
        check_write(
            info,
            schema_columns(schema),
            format=source.get("format"),
            partition_by=requested,
            destination=None,
        )
    except ValueError as error:
        raise ValueError(f"data source {SHORT_NAME!r}: {error}") from None
    return catalog, info


def _conflict_mode(overwrite: bool, requested: str | None) -> str:
    """``overwrite`` replaces; ``append`` appends, or refuses existing output with ``fail``."""
    mode = (requested or "").lower() or ("replace" if overwrite else "append")
    if overwrite and mode != "replace":
        raise ValueError(f"mode('overwrite') replaces output: conflict_mode={requested!r} contradicts it")
    if not overwrite and mode == "replace":
        raise ValueError("conflict_mode='replace' is mode('overwrite')")
    return mode


def _data_schema(schema: StructType, partition_columns: Sequence[str]) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([schema[name] for name in schema.fieldNames() if name not in partition_columns])


def _task_config(
    plan: SparkWritePlan, data_schema: StructType, partition_columns: Sequence[str]
) -> TaskConfig:
    import pyspark
    from pyspark.sql.types import TimestampType

    codec, suffix = file_format(plan.format).resolve_codec(
        plan.writer.compression, SPARK_DEFAULT_CODECS[plan.format]
    )
    parquet, orc = plan.format == "parquet", plan.format == "orc"
    # Spark's ORC writer rebases timestamps in the JVM's default zone; this driver-side worker has
    # no session to ask, so it takes the zone a JVM started from its environment gets.
    rebase = (
        timestamp_rebase(process_time_zone()) if orc and contains_type(data_schema, TimestampType) else None
    )
    return TaskConfig(
        committer=plan.commit.committer,
        destination=plan.commit.destination.uri,
        job_id=plan.job_id,
        commit_options=plan.commit_options,
        s3=plan.s3,
        hdfs=plan.hdfs,
        format=plan.format,
        codec=codec,
        file_suffix=suffix,
        data_columns=tuple(data_schema.fieldNames()),
        partition_columns=tuple(partition_columns),
        key_columns=tuple(f"{HIDDEN_PREFIX}p{index}" for index in range(len(partition_columns))),
        line_column=None,
        header=None,
        writer=plan.writer,
        spark_schema_json=data_schema.json() if parquet or orc else None,
        spark_version=pyspark.__version__ if parquet else None,
        timestamp_rebase=rebase,
        empty_schema=empty_file_schema(data_schema, None, "UTC"),
    )


def _with_partition_keys(config: TaskConfig, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its partition values as strings ('' as null, as Spark; longer than
    `PARTITION_VALUE_BYTES` refused, as by ``write_committed``), sorted by them, so the task writer
    sees each partition directory's rows as one run."""
    if not config.partitioned:
        return batch
    keys = []
    for column in config.partition_columns:
        as_string = pc.cast(batch.column(column), pa.string())
        longest = pc.max(pc.binary_length(as_string)).as_py()
        if longest is not None and longest > PARTITION_VALUE_BYTES:
            raise ValueError(partition_value_too_long(column))
        keys.append(pc.if_else(pc.equal(as_string, ""), pa.scalar(None, pa.string()), as_string))
    with_keys = pa.RecordBatch.from_arrays(
        [*batch.columns, *keys], names=[*batch.schema.names, *config.key_columns]
    )
    if _already_sorted(keys):  # e.g. after df.sortWithinPartitions(*partition_by): skip sort and copy
        return with_keys
    order = pc.sort_indices(with_keys, sort_keys=[(key, "ascending") for key in config.key_columns])
    return with_keys.take(order)


def _already_sorted(keys: Sequence[pa.Array]) -> bool:
    """Whether the rows are already in ascending lexicographic order of `keys` (no nulls), so that
    sorting them would leave them as they are (a tenth of the sort's cost)."""
    if any(key.null_count for key in keys):
        return False  # nulls sort last: not worth checking here
    count = len(keys[0]) if keys else 0
    if count < 2:
        return True
    in_order = None
    for key in reversed(keys):
        before, after = key.slice(0, count - 1), key.slice(1)
        if in_order is None:
            in_order = pc.less_equal(before, after)
        else:
            in_order = pc.or_(pc.less(before, after), pc.and_(pc.equal(before, after), in_order))
    return bool(pc.all(in_order).as_py())
