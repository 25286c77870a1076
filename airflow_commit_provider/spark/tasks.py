"""The task side: what every Spark task runs through ``mapInArrow``.

One Spark partition is one commit task: ``TaskContext.partitionId()`` is the task number and
``TaskContext.taskAttemptId()`` (unique per SparkContext) the attempt. The task rebuilds store and
committer from a :class:`~airflow_commit_provider.spark.task_config.TaskConfig`, writes its rows into
files through a :class:`TaskAttempt`, commits the attempt itself and returns ONE row: the
TaskCommitResult as JSON, with rows, bytes and files. Spark hands the driver exactly one result per
partition (the attempt it accepted); attempts it failed or killed never reach the driver, and their
uploads are aborted by job commit's cleanup or job abort.

Memory is bounded the way Spark's own writer bounds it (sort-based, one writer at a time): for a
partitioned write the driver sorts each Spark partition by the partition values
(``sortWithinPartitions``, which spills to disk), so the task sees each partition directory's rows
contiguously and keeps exactly one file open; batches are sliced at partition and size boundaries.
The task holds at most one Arrow batch plus one parquet row group (``parquet.block.size``).

File names are Spark's: ``part-%05d-<jobId>-c%03d<suffix>`` (in partition directories
``part-%05d-<jobId>.c%03d<suffix>``, as Spark's dynamic-partition writer names them) with the Spark
partition ID, the job ID and a per-directory counter that increases when
``maxRecordsPerFile``/``maxBytesPerFile`` rolls a file over (HadoopMapReduceCommitProtocol.getFilename,
FileFormatDataWriter's SingleDirectoryDataWriter and BaseDynamicPartitionDataWriter). All attempts of
a task therefore target the same names; the committer makes exactly one attempt's files visible.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_commit_provider.core.committers import TaskAttempt, TaskCommitResult, create_committer
from airflow_commit_provider.core.escaping import partition_path
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.core.store.streams import PublishOnCloseStream
from airflow_commit_provider.spark.formats import CountingSink, FormatWriter, open_format_writer
from airflow_commit_provider.spark.instrumentation import TaskInstrumentation
from airflow_commit_provider.spark.orc_layout import to_spark_layout
from airflow_commit_provider.spark.task_config import TaskConfig
from airflow_commit_provider.spark.task_info import TaskInfo, current_task_info

log = logging.getLogger("airflow_commit_provider.spark")

#: The schema of the one row each task returns (mapInArrow needs exact Arrow types: long, not int).
RESULT_SCHEMA = (
    "task long, attempt long, attempt_number long, result string, files long, rows long, bytes long"
)
_RESULT_ARROW_SCHEMA = pa.schema(
    [
        ("task", pa.int64()),
        ("attempt", pa.int64()),
        ("attempt_number", pa.int64()),
        ("result", pa.string()),
        ("files", pa.int64()),
        ("rows", pa.int64()),
        ("bytes", pa.int64()),
    ]
)


@dataclass
class TaskOutcome:
    info: TaskInfo
    result: TaskCommitResult | None
    files: int
    rows: int
    bytes: int

    def to_batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist(
            [
                {
                    "task": self.info.partition,
                    "attempt": self.info.attempt_id,
                    "attempt_number": self.info.attempt_number,
                    "result": None if self.result is None else _json(self.result),
                    "files": self.files,
                    "rows": self.rows,
                    "bytes": self.bytes,
                }
            ],
            schema=_RESULT_ARROW_SCHEMA,
        )


def _json(result: TaskCommitResult) -> str:
    import json

    return json.dumps(result.to_json())


def write_partition(
    config: TaskConfig, instrumentation: TaskInstrumentation | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The function given to ``mapInArrow`` (bound to its config with functools.partial)."""
    yield run_task_attempt(config, current_task_info(), batches, instrumentation=instrumentation).to_batch()


def run_task_attempt(
    config: TaskConfig,
    info: TaskInfo,
    batches: Iterable[pa.RecordBatch],
    *,
    instrumentation: TaskInstrumentation | None = None,
) -> TaskOutcome:
    """Write, then commit, one task attempt; on any failure abort the attempt and re-raise."""
    probes = instrumentation or TaskInstrumentation()
    s3 = {} if config.destination.startswith("file:") else config.s3.store_kwargs()
    store = open_store(config.destination, threads=config.commit_options.threads, hdfs=config.hdfs, **s3)
    try:
        committer = create_committer(
            config.committer, store, config.destination, config.job_id, config.commit_options
        )
        attempt = committer.task_attempt(info.partition, info.attempt_id)
        # Task setup refuses an attempt that starts after the job was committed or aborted (a
        # zombie, a late duplicate): it must not write anything once the job's cleanup has run.
        attempt.setup_task()
        committed = False
        try:
            writer = PartitionWriter(config, attempt, info, probes)
            writer.write_all(batches)
            if probes.before_commit:
                probes.before_commit(info)
            result: TaskCommitResult | None = None
            if attempt.needs_task_commit():
                result = attempt.commit_task(
                    rows=writer.rows, partition_rows=writer.partition_rows if config.partitioned else None
                )
                committed = True
                if result.adopted_from:
                    log.info(
                        "task %d attempt %d: task already committed by %s; adopted it",
                        info.partition,
                        info.attempt_id,
                        result.task_attempt_id,
                    )
            else:
                attempt.discard_output()  # nothing to commit: not an attempt that lost
            if probes.after_commit:
                probes.after_commit(info, result)
        except BaseException:
            if not committed:
                _abort_quietly(attempt, info)
            raise
        return TaskOutcome(info, result, writer.files, writer.rows, writer.bytes)
    finally:
        store.close()


def _abort_quietly(attempt: TaskAttempt, info: TaskInfo) -> None:
    try:
        attempt.abort_task()
    except Exception:  # the original failure matters more; job cleanup retries the abort
        log.warning("task %d attempt %d: abort failed", info.partition, info.attempt_id, exc_info=True)


class _OpenFile:
    def __init__(
        self, relative_path: str, stream: PublishOnCloseStream, sink: CountingSink, writer: FormatWriter
    ):
        self.relative_path = relative_path
        self.stream = stream
        self.sink = sink
        self.writer = writer


class PartitionWriter:
    """Writes one task's rows: one open file at a time, rolled over at partition and size limits."""

    def __init__(self, config: TaskConfig, attempt: TaskAttempt, info: TaskInfo, probes: TaskInstrumentation):
        self.config = config
        self.attempt = attempt
        self.info = info
        self.probes = probes
        self.rows = 0
        self.bytes = 0
        self.files = 0
        self.partition_rows: dict[str, int] = {}
        """Rows per partition directory (a partitioned write's partition ``_SUCCESS`` files report them)."""
        self._counters: dict[str, int] = {}
        self._current: _OpenFile | None = None
        self._current_partition_dir: str | None = None
        self._data_schema: pa.Schema | None = None
        # orc: Spark's types of the data columns, whose layout the files follow (orc_layout).
        self._orc_fields = (
            json.loads(config.spark_schema_json)["fields"]
            if config.format == "orc" and config.spark_schema_json
            else None
        )

    # Input ----------------------------------------------------------------------------------------
    def write_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        try:
            for batch in batches:
                if self.probes.received_batch:
                    self.probes.received_batch(self.info, batch)
                if batch.num_rows:
                    self._write_batch(batch)
                elif self._data_schema is None:
                    self._data_schema = self._with_spark_metadata(self._data(batch).schema)
            if self.files == 0 and self._current is None and not self.config.partitioned:
                self._write_empty_file()
            self._close_current()
        except BaseException:
            self._discard_current()
            raise

    def _data(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.config.line_column is not None:
            return batch.select([self.config.line_column])
        data = batch.select(list(self.config.data_columns))
        if self._orc_fields is not None:
            return to_spark_layout(data, self._orc_fields, self.config.timestamp_rebase)
        return data

    def _write_batch(self, batch: pa.RecordBatch) -> None:
        data = self._data(batch)
        if self._data_schema is None:
            self._data_schema = self._with_spark_metadata(data.schema)
        if not self.config.partitioned:
            self._write_rows("", data)
            return
        for directory, start, length in self._runs(batch):
            self._write_rows(directory, data.slice(start, length))

    def _runs(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, int]]:
        """(partition directory, offset, length) of each run of equal partition values.

        Rows arrive sorted by partition values, so each directory is one run per task; should a
        directory recur anyway, its file counter continues and names stay unique.
        """
        keys = [batch.column(name) for name in self.config.key_columns]
        count = batch.num_rows
        starts = [0]
        if count > 1:
            changed = None
            for key in keys:
                # Spark turned '' into null, so filling nulls with '' keeps values distinct.
                filled = pc.fill_null(key, "")
                differs = pc.not_equal(filled.slice(1), filled.slice(0, count - 1))
                changed = differs if changed is None else pc.or_(changed, differs)
            starts += [index + 1 for index in pc.indices_nonzero(changed).to_pylist()]
        ends = [*starts[1:], count]
        for start, end in zip(starts, ends, strict=True):
            values = [key[start].as_py() for key in keys]
            yield partition_path(self.config.partition_columns, values), start, end - start

    # Files ----------------------------------------------------------------------------------------
    def _write_rows(self, partition_dir: str, data: pa.RecordBatch) -> None:
        if partition_dir != self._current_partition_dir:
            self._close_current()
            self._current_partition_dir = partition_dir
        limit_rows = self.config.writer.max_records_per_file
        offset = 0
        while offset < data.num_rows:
            current = self._current or self._open(partition_dir)
            take = data.num_rows - offset
            if limit_rows:
                take = min(take, limit_rows - current.writer.rows)
            current.writer.write(data.slice(offset, take))
            offset += take
            if self._full(current):
                self._close_current()

    def _full(self, current: _OpenFile) -> bool:
        limits = self.config.writer
        if limits.max_records_per_file and current.writer.rows >= limits.max_records_per_file:
            return True
        if limits.max_bytes_per_file:
            if current.writer.buffered_bytes >= limits.max_bytes_per_file and hasattr(
                current.writer, "flush"
            ):
                current.writer.flush()
            return current.writer.bytes_written >= limits.max_bytes_per_file
        return False

    def _open(self, partition_dir: str) -> _OpenFile:
        config = self.config
        counter = self._counters.get(partition_dir, 0)
        self._counters[partition_dir] = counter + 1
        separator = "." if config.partitioned else "-"
        name = f"part-{self.info.partition:05d}-{config.job_id}{separator}c{counter:03d}{config.file_suffix}"
        relative = f"{partition_dir}/{name}" if partition_dir else name
        stream = self.attempt.create_file(relative)
        try:
            sink = CountingSink(stream)
            assert self._data_schema is not None
            writer = open_format_writer(
                config.format,
                sink,
                self._data_schema,
                config.codec,
                line_sep=config.writer.line_sep,
                header=config.header,
                row_group_bytes=min(
                    config.writer.row_group_bytes, config.writer.max_bytes_per_file or sys.maxsize
                ),
                stripe_bytes=min(config.writer.stripe_bytes, config.writer.max_bytes_per_file or sys.maxsize),
            )
        except BaseException:
            stream.discard()
            raise
        self._current = _OpenFile(relative, stream, sink, writer)
        return self._current

    def _close_current(self) -> None:
        current, self._current = self._current, None
        if current is None:
            return
        try:
            current.writer.close()
            current.sink.close()
        except BaseException:
            current.stream.discard()
            raise
        current.stream.close()
        self.files += 1
        self.rows += current.writer.rows
        directory = current.relative_path.rpartition("/")[0]
        self.partition_rows[directory] = self.partition_rows.get(directory, 0) + current.writer.rows
        self.bytes += current.sink.count
        if self.probes.after_file:
            self.probes.after_file(self.info, current.relative_path)

    def _discard_current(self) -> None:
        current, self._current = self._current, None
        if current is not None:
            try:
                current.stream.discard()
            except Exception:
                log.debug("discarding %s failed", current.relative_path, exc_info=True)

    def _write_empty_file(self) -> None:
        """Spark writes one empty file from partition 0 of an empty, unpartitioned write, so the
        schema survives (FileFormatWriter; SPARK-23271); we do the same."""
        if self.info.partition != 0:
            return
        if self._data_schema is None:
            if self.config.empty_schema is None:
                return
            empty = pa.RecordBatch.from_pylist([], schema=self.config.empty_schema)
            self._data_schema = self._with_spark_metadata(self._data(empty).schema)
        self._open("")

    def _with_spark_metadata(self, schema: pa.Schema) -> pa.Schema:
        if self.config.format != "parquet" or not self.config.spark_schema_json:
            return schema
        metadata = dict(schema.metadata or {})
        metadata[b"org.apache.spark.sql.parquet.row.metadata"] = self.config.spark_schema_json.encode()
        if self.config.spark_version:
            metadata[b"org.apache.spark.version"] = self.config.spark_version.encode()
        return schema.with_metadata(metadata)
