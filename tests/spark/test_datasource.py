"""``df.write.format("committed")``: our protocol through Spark's own write path, in classic PySpark
and over a Spark Connect server, on ``file://`` and the embedded S3.

After each write the destination holds exactly the rows written (read back), `_SUCCESS` and the
job record list exactly this job's files, and no pending upload, temp object or temp directory
remains. Local mode never speculates (see conftest.py); what speculation does to a write - a
killed attempt, two attempts of one task committing - is driven through Spark's kill path and
through the data source's task side run in real Spark tasks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_hooks import SlowAttemptCoordinator, SlowFirstAttempt
from spark_support import COLUMNS, S3_COLUMNS, read_local, read_s3_rows, rows_of, sample_df, store_for
from support.invariants import assert_committed, is_commit_record, is_temp, store_files

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import JobNotActiveError
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import register_data_source, write_committed
from airflow_commit_provider.spark.datasource import CommittedDataSource

pytestmark = pytest.mark.spark


@pytest.fixture(params=["classic", "connect"])
def session(request: pytest.FixtureRequest) -> Any:
    """The shared classic session or the Spark Connect one, with the data source registered (twice:
    registering is idempotent)."""
    spark = request.getfixturevalue("spark" if request.param == "classic" else "connect_spark")
    register_data_source(spark)
    register_data_source(spark)
    return spark


def _destination(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """A ``file://`` URL or a fresh S3 prefix, and the options that reach that store."""
    if kind == "local":
        return f"file://{tmp_path / 'out'}", {}
    return request.getfixturevalue("s3_prefix"), dict(request.getfixturevalue("s3_options"))


def _save(df: Any, path: str, mode: str, options: dict[str, Any]) -> None:
    df.write.format("committed").mode(mode).options(**options).save(path)


def _check(
    request: pytest.FixtureRequest,
    session: Any,
    kind: str,
    path: str,
    job_id: str,
    expected: Any,
    *,
    kept: frozenset[str] = frozenset(),
) -> tuple[SuccessData, set[str]]:
    """Job `job_id` committed exactly its files (returned), only the files `kept` of earlier jobs
    remain, the rows read back are exactly `expected`'s, and nothing is pending or left behind."""
    dest = StorePath.parse(path)
    store = store_for(dest, request.getfixturevalue("spark_s3_store") if kind == "s3" else None)
    visible = {
        name: data
        for name, data in store_files(store, dest).items()
        if not is_temp(name) and not is_commit_record(name)
    }
    # Spark's names: part-NNNNN-<job>-cNNN, and part-NNNNN-<job>.cNNN in partition directories.
    written = {name: data for name, data in visible.items() if f"-{job_id}" in name.rsplit("/", 1)[-1]}
    assert written and set(visible) - set(written) == kept
    success = assert_committed(store, dest, visible, job_id=job_id, committed=written)
    if kind == "local":
        read = read_local(session, "parquet", path, expected.schema)
        assert rows_of(read) == rows_of(expected)
    else:
        assert read_s3_rows(request.getfixturevalue("arrow_s3"), "parquet", dest) == rows_of(
            expected, S3_COLUMNS
        )
    return success, set(written)


def _job_id() -> str:
    return str(uuid.uuid4())


@pytest.mark.parametrize(
    ("session", "kind"),
    [
        pytest.param("classic", "local", id="classic-file"),
        pytest.param("connect", "s3", marks=pytest.mark.s3, id="connect-s3"),
    ],
    indirect=["session"],
)
def test_append_then_overwrite_replaces_only_the_partitions_written(session, kind, tmp_path, request):
    """``append`` adds a job's files; ``overwrite`` is ``replace`` with the partitioned committer:
    the partitions written are replaced, the others keep the first job's files."""
    path, options = _destination(kind, tmp_path, request)
    df = sample_df(session, rows=40)
    first = _job_id()
    _save(df, path, "append", {**options, "partition_by": "part", "job_id": first, "maxRecordsPerFile": 7})
    success, first_files = _check(request, session, kind, path, first, df)
    assert success.committer == ("manifest" if kind == "local" else "magic")

    replacement = (
        sample_df(session, rows=12)
        .where("part = 'b c'")
        .selectExpr("id + 1000 AS id", *(column for column in COLUMNS if column != "id"))
    )
    second = _job_id()
    _save(replacement, path, "overwrite", {**options, "partition_by": "part", "job_id": second})
    kept = df.where("part <> 'b c'")
    untouched = frozenset(name for name in first_files if not name.startswith("part=b c/"))
    success, _ = _check(request, session, kind, path, second, kept.unionByName(replacement), kept=untouched)
    assert success.committer == "partitioned"
    assert success.partitions == ["part=b c"]


@pytest.mark.parametrize(
    ("session", "kind", "committer"),
    [
        pytest.param("classic", "s3", "magic", marks=pytest.mark.s3, id="classic-s3-magic"),
        pytest.param("classic", "local", "manifest", id="classic-file-manifest"),
    ],
    indirect=["session"],
)
def test_task_failing_on_its_first_attempt_is_retried(session, kind, committer, tmp_path, request):
    """Partition 1's first attempt fails after its writer has written files (its second Arrow batch
    raises, in the DataFrame's own mapInArrow): Spark retries it, and exactly one copy is committed.

    Classic only: a task's retry happens in the executors, which run the same tasks whether the plan
    came over Spark Connect or not, and over Connect this case took 122 s of the last compatibility
    run. Connect's own path (the source registered, its options, modes and refusals carried over,
    ``write_committed``'s tasks) is checked by the other tests here."""
    path, options = _destination(kind, tmp_path, request)
    markers = tmp_path / "markers"
    markers.mkdir()
    df = sample_df(session, rows=200)
    failing = df.mapInArrow(
        _fail_first_attempt(partition=1, after_batches=1, markers=str(markers)), df.schema
    )
    job_id = _job_id()
    options = {
        **options,
        "committer": committer,
        "partition_by": "part",
        "job_id": job_id,
        "maxRecordsPerFile": 9,
    }
    _save(failing, path, "append", options)
    assert [marker.name for marker in markers.iterdir()] == ["failed-1"], "the first attempt did not fail"
    _check(request, session, kind, path, job_id, df)


def _fail_first_attempt(
    partition: int, after_batches: int, markers: str
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A mapInArrow function (pickled by value: a closure) that raises in attempt 0 of `partition`
    once it has passed on `after_batches` batches, leaving a marker file that says it did."""

    def transform(batches: Iterator[Any]) -> Iterator[Any]:
        import os

        from pyspark import TaskContext

        context = TaskContext.get()
        failing = context.partitionId() == partition and context.attemptNumber() == 0
        for index, batch in enumerate(batches):
            if failing and index == after_batches:
                open(os.path.join(markers, f"failed-{partition}"), "w").close()
                raise RuntimeError(f"injected failure in partition {partition}, attempt 0")
            yield batch

    return transform


@pytest.mark.s3
def test_killed_attempt_leaves_nothing_behind(spark, s3_prefix, s3_options, request):
    """What speculation does to the losing attempt, through Spark's own kill path (``killTaskAttempt``,
    as TaskSetManager kills a speculative loser): partition 1's first attempt stalls once its writer
    has had a batch and is killed; the rerun commits, and job commit removes what the killed attempt
    left pending."""
    register_data_source(spark)
    path, options = s3_prefix, dict(s3_options)
    df = sample_df(spark, rows=200)
    context = spark.sparkContext
    with SlowAttemptCoordinator(
        kill=lambda attempt: context._jsc.sc().killTaskAttempt(attempt, True, "another attempt succeeded")
    ) as coordinator:
        host, port = coordinator.address
        stalling = df.mapInArrow(
            _stall_first_attempt(SlowFirstAttempt(partition=1, host=host, port=port)), df.schema
        )
        job_id = _job_id()
        _save(
            stalling,
            path,
            "append",
            {**options, "committer": "magic", "job_id": job_id, "maxRecordsPerFile": 9},
        )
    assert coordinator.errors == []
    assert len(coordinator.killed) == 1
    _check(request, spark, "s3", path, job_id, df)


def _stall_first_attempt(hook: SlowFirstAttempt) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A mapInArrow function that hands on one batch, then calls `hook` (which stalls attempt 0 of
    its partition until Spark kills it)."""

    def transform(batches: Iterator[Any]) -> Iterator[Any]:
        from airflow_commit_provider.spark.task_info import current_task_info

        for index, batch in enumerate(batches):
            if index == 1:
                hook(current_task_info())
            yield batch

    return transform


def test_two_attempts_of_one_task_commit_once(spark, tmp_path):
    """Two attempts of task 0 commit (as a speculative duplicate and the original would): the
    data source's task side, run in real Spark tasks (each its own task attempt ID), lets the first
    win; the second adopts its result, so job commit with either message commits the first
    attempt's files only. An attempt starting after job commit is refused before writing.

    Spark's commit coordinator cannot do this for a Python data source: it is asked only after
    ``write()`` returned, when the attempt has already committed (see ``spark.datasource``)."""
    path = f"file://{tmp_path / 'out'}"
    job_id = _job_id()
    schema = sample_df(spark, rows=1).schema
    writer = CommittedDataSource({"path": path, "job_id": job_id, "committer": "manifest"}).writer(
        schema, False
    )
    first_rows = sample_df(spark, rows=6).toArrow()
    duplicate_rows = sample_df(spark, rows=6).selectExpr("id + 100 AS id", *COLUMNS[1:]).toArrow()

    def attempt(table: pa.Table) -> Any:
        batches = table.to_batches()
        return (
            spark.sparkContext.parallelize([0], 1)
            .mapPartitions(lambda _: [writer.write(iter(batches))])
            .collect()[0]
        )

    first, duplicate = attempt(first_rows), attempt(duplicate_rows)
    assert first.outcome.info.attempt_id != duplicate.outcome.info.attempt_id
    assert first.outcome.result.adopted_from is None
    assert duplicate.outcome.result.adopted_from is not None
    assert duplicate.outcome.result.task_attempt_id == first.outcome.result.task_attempt_id

    writer.commit([duplicate])
    dest = StorePath.parse(path)
    store = LocalStore()
    visible = {name: data for name, data in store_files(store, dest).items() if not is_commit_record(name)}
    assert_committed(store, dest, visible, job_id=job_id)
    assert rows_of(read_local(spark, "parquet", path, schema)) == rows_of(sample_df(spark, rows=6))

    with pytest.raises(Exception, match=JobNotActiveError.__name__):
        attempt(duplicate_rows)


def test_refusals_name_what_is_wrong(session, tmp_path):
    """Each refusal happens before any task runs and names the option, mode or column."""
    df = sample_df(session, rows=4)
    path = f"file://{tmp_path / 'out'}"
    cases = [
        (lambda: _save(df, path, "append", {"no_such_option": "1"}), "no_such_option"),
        (lambda: _save(df, path, "ignore", {}), "Ignore"),
        (lambda: _save(df, path, "append", {"format": "csv"}), "format='csv'"),
        (lambda: _save(df, path, "append", {"partition_by": "ts"}), "'ts' has type timestamp"),
        (lambda: _save(df, path, "append", {"partition_by": "missing"}), "'missing'"),
        (lambda: _save(df, path, "overwrite", {"committer": "magic"}), "cannot honour"),
        (lambda: _save(df, path, "overwrite", {"conflict_mode": "append"}), "contradicts"),
    ]
    for write, named in cases:
        with pytest.raises(Exception, match=named):
            write()
    assert not (tmp_path / "out").exists()


@pytest.mark.s3
def test_write_committed_over_spark_connect(connect_spark, s3_prefix, s3_options, spark_s3_store, arrow_s3):
    """``write_committed`` runs unchanged on a Spark Connect session (its tasks are mapInArrow)."""
    df = sample_df(connect_spark, rows=40)
    summary = write_committed(
        df,
        s3_prefix,
        partition_by=["part"],
        conflict_mode="replace",
        options={**s3_options, "maxRecordsPerFile": 7},
    )
    dest = StorePath.parse(s3_prefix)
    visible = {
        name: data
        for name, data in store_files(spark_s3_store, dest).items()
        if not is_temp(name) and not is_commit_record(name)
    }
    assert_committed(spark_s3_store, dest, visible, job_id=summary.job_id)
    assert summary.committer == "partitioned" and summary.rows == 40
    assert read_s3_rows(arrow_s3, "parquet", dest) == rows_of(df, S3_COLUMNS)
