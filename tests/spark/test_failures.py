"""Failures during a committed Spark write: retried tasks, speculation, a driver failure.

After each, the destination holds exactly one copy of each expected file (the rows read back equal
the rows written, no duplicates), `_SUCCESS` lists exactly the visible files, and no pending upload,
temp object or temp directory remains.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from spark_hooks import FailFirstAttempt, SlowAttemptCoordinator, SlowFirstAttempt, instrumented_write
from spark_support import (
    assert_committed_write,
    read_local,
    read_s3_rows,
    rows_of,
    sample_df,
    store_for,
    visible_files,
)
from support.invariants import assert_nothing_left_behind, pending_uploads

from airflow_commit_provider.core.formats.attempts import LostAttempt
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import JobNotActiveError
from airflow_commit_provider.core.stages.uploads import recorded_uploads
from airflow_commit_provider.spark import write_committed
from airflow_commit_provider.spark.instrumentation import TaskInstrumentation, WriteInstrumentation
from airflow_commit_provider.spark.task_info import TaskInfo
from airflow_commit_provider.spark.tasks import run_task_attempt

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def df(spark):
    return sample_df(spark, rows=24).cache()


def _destination(kind: str, tmp_path, request) -> tuple[str, dict]:
    if kind == "local":
        return str(tmp_path / "out"), {}
    return request.getfixturevalue("s3_prefix"), dict(request.getfixturevalue("s3_options"))


def _check(spark, df, kind, dest_text, summary, request, fmt="parquet"):
    dest = StorePath.parse(dest_text)
    store = store_for(dest, request.getfixturevalue("spark_s3_store") if kind == "s3" else None)
    assert_committed_write(store, dest, summary)
    if kind == "local":
        assert rows_of(read_local(spark, fmt, dest_text, df.schema)) == rows_of(df)
    else:
        arrow_s3 = request.getfixturevalue("arrow_s3")
        assert read_s3_rows(arrow_s3, fmt, dest) == rows_of(df, ("id", "name", "amount", "flag", "part"))


@pytest.mark.parametrize(
    ("kind", "committer", "point", "mode"),
    [
        pytest.param("local", "manifest", "after_file", "raise", id="local-manifest-fail-mid-write"),
        pytest.param("local", "magic", "after_commit", "raise", id="local-magic-fail-after-task-commit"),
        pytest.param(
            "s3", "magic", "after_file", "crash", marks=pytest.mark.s3, id="s3-magic-crash-mid-write"
        ),
        pytest.param(
            "s3", "magic", "after_commit", "raise", marks=pytest.mark.s3, id="s3-magic-fail-after-commit"
        ),
        pytest.param(
            "s3", "partitioned", "after_file", "raise", marks=pytest.mark.s3, id="s3-partitioned-raise"
        ),
    ],
)
def test_task_fails_on_first_attempt_then_succeeds(
    spark, df, tmp_path, request, kind, committer, point, mode
):
    """Attempt 0 of partition 1 dies mid-write (its uploads/temp files stay behind: only job cleanup can
    remove them) or fails right after its task commit (the retry must adopt the committed attempt)."""
    dest_text, options = _destination(kind, tmp_path, request)
    hook = FailFirstAttempt(partition=1, mode=mode)
    task_probes = (
        TaskInstrumentation(after_file=hook)
        if point == "after_file"
        else TaskInstrumentation(after_commit=hook)
    )
    leftovers = []
    summary = instrumented_write(
        df,
        dest_text,
        WriteInstrumentation(
            task=task_probes,
            before_job_commit=lambda job, results, _c: leftovers.append(_uncommitted_leftovers(job, results)),
        ),
        partition_by=["part"],
        committer=committer,
        options={**options, "maxRecordsPerFile": 3},
    )
    # A crashed attempt cannot clean up: its uploads/files waited for job cleanup.
    assert bool(leftovers[0]) == (mode == "crash")
    assert summary.retried_tasks == 1
    assert summary.adopted_tasks == (1 if point == "after_commit" else 0)
    assert summary.rows == 24
    _check(spark, df, kind, dest_text, summary, request)
    # The job record names the attempt that lost: aborted before any commit (failed), or dead
    # (killed); one that failed after its task commit is the commit its retry adopted.
    expected = [] if point == "after_commit" else ["failed" if mode == "raise" else "killed"]
    assert [a.outcome for a in _lost_attempts(kind, dest_text, summary, request)] == expected


def _lost_attempts(kind, dest_text, summary, request) -> list[LostAttempt]:
    dest = StorePath.parse(dest_text)
    store = store_for(dest, request.getfixturevalue("spark_s3_store") if kind == "s3" else None)
    return load_job_record(store, dest, summary.job_id).lost_attempts or []


def _uncommitted_leftovers(job, results) -> set[str]:
    """Task attempts that are not in the accepted results but left pending uploads or work files:
    evidence that a failed or killed attempt really did leave something for job cleanup to remove."""
    committed = {result.task_attempt_id for result in results}
    found = set()
    for attempt, path, upload in recorded_uploads(job.context):
        if attempt not in committed and any(
            u.upload_id == upload for u in job.store.list_multipart_uploads(path.parent)
        ):
            found.add(attempt)
    tasks_dir = job.layout.job_attempt_dir.join("tasks")
    for status in job.store.list_files(tasks_dir):
        attempt = status.path.relative_to(tasks_dir).split("/", 1)[0]
        if attempt not in committed:
            found.add(attempt)
    return found


def _zombie_batch(config, marker: str) -> pa.RecordBatch:
    """Rows a duplicate attempt writes; if they ever became visible the read-back would show them."""
    columns = {config.line_column: [f'{{"id": -1, "name": "{marker}"}}']}
    columns.update({key: ["a"] for key in config.key_columns})
    return pa.RecordBatch.from_pydict(columns)


@pytest.mark.parametrize(
    ("kind", "committer"),
    [
        pytest.param("local", "manifest", id="local-manifest"),
        pytest.param("s3", "magic", marks=pytest.mark.s3, id="s3-magic"),
    ],
)
def test_speculative_duplicates(spark, df, tmp_path, request, kind, committer):
    """What speculation does to a write, with Spark's real kill path (local mode cannot speculate:
    see conftest.py):

    1. attempt 0 of partition 1 is deliberately slow after writing a file; Spark kills it
       (``killTaskAttempt``, as TaskSetManager kills a losing speculative attempt) and the other
       attempt's result is the one the driver receives; the killed attempt's pending uploads are
       aborted by job cleanup;
    2. a duplicate attempt of an already committed task commits before job commit: it must adopt
       the committed attempt and discard its own output;
    3. duplicates that come too late: one starting after job commit is refused before writing; one
       set up during the job that writes and commits after it is refused, and its output never shows.
    """
    dest_text, options = _destination(kind, tmp_path, request)
    dest = StorePath.parse(dest_text)
    store = store_for(dest, request.getfixturevalue("spark_s3_store") if kind == "s3" else None)
    captured = {}

    def duplicates_before_job_commit(job, results, config):
        captured["config"] = config
        killed = {job.layout.task_attempt_id(1, attempt) for attempt in coordinator.killed}
        captured["killed"] = killed
        captured["early"] = job.layout.task_attempt_id(0, 900_001)
        assert killed and killed <= _uncommitted_leftovers(job, results), "the killed attempt left nothing?"
        early = run_task_attempt(config, TaskInfo(0, 900_001, 7), [_zombie_batch(config, "early zombie")])
        assert early.result is not None and early.result.adopted_from is not None
        assert early.result.task_attempt_id in {r.task_attempt_id for r in results}
        late = job.task_attempt(1, 900_003)
        late.setup_task()
        captured["late"] = late

    context = spark.sparkContext
    with SlowAttemptCoordinator(
        kill=lambda attempt: context._jsc.sc().killTaskAttempt(attempt, True, "another attempt succeeded")
    ) as coordinator:
        host, port = coordinator.address
        summary = instrumented_write(
            df,
            dest_text,
            WriteInstrumentation(
                task=TaskInstrumentation(after_file=SlowFirstAttempt(partition=1, host=host, port=port)),
                before_job_commit=duplicates_before_job_commit,
            ),
            format="json",
            partition_by=["part"],
            committer=committer,
            options={**options, "maxRecordsPerFile": 3},
        )
    assert coordinator.errors == []
    assert len(coordinator.killed) == 1
    assert summary.retried_tasks == 1
    _check(spark, df, kind, dest_text, summary, request, fmt="json")
    committed_files = visible_files(store, dest)
    # The record names both losers: the attempt Spark killed (dead before it could note its end, or
    # aborted once its copy had committed) and the early duplicate whose commit was refused.
    lost = {a.task_attempt_id: a.outcome for a in _lost_attempts(kind, dest_text, summary, request)}
    assert lost.pop(captured["early"]) == "refused"
    assert set(lost) == captured["killed"] and set(lost.values()) <= {"killed", "speculative lost"}, lost

    # 3a. Starting after job commit: refused before writing anything.
    config = captured["config"]
    with pytest.raises(JobNotActiveError):
        run_task_attempt(config, TaskInfo(1, 900_002, 8), [_zombie_batch(config, "late zombie")])
    _check(spark, df, kind, dest_text, summary, request, fmt="json")

    # 3b. Set up during the job, still writing when the job ends, then commits: refused, and its
    # output never becomes visible nor stays pending; what it wrote into the ended job's work area
    # (an upload record, a work directory, on local files their folders) goes with it.
    late = captured["late"]
    with late.create_file(f"part=a/part-00001-{summary.job_id}-c000.json") as stream:
        stream.write(b'{"id": -1, "name": "late zombie"}\n')
    with pytest.raises(JobNotActiveError):
        late.commit_task(rows=1)
    late.abort_task()
    assert pending_uploads(store, dest) == []
    assert visible_files(store, dest) == committed_files
    assert_nothing_left_behind(store, dest)
    if kind == "local":
        assert rows_of(read_local(spark, "json", dest_text, df.schema)) == rows_of(df)
    else:
        assert read_s3_rows(request.getfixturevalue("arrow_s3"), "json", dest) == rows_of(
            df, ("id", "name", "amount", "flag", "part")
        )


@pytest.mark.parametrize(
    ("kind", "committer"),
    [
        pytest.param("local", "manifest", id="local-manifest"),
        pytest.param("local", "file-v1", id="local-file-v1"),
        pytest.param("s3", "magic", marks=pytest.mark.s3, id="s3-magic"),
        pytest.param("s3", "directory", marks=pytest.mark.s3, id="s3-directory"),
    ],
)
def test_driver_fails_between_task_commits_and_job_commit(spark, df, tmp_path, request, kind, committer):
    """Every task committed, then the driver fails before job commit: the job is aborted, the
    destination keeps exactly its previous content, and a rerun commits normally."""
    dest_text, options = _destination(kind, tmp_path, request)
    dest = StorePath.parse(dest_text)
    store = store_for(dest, request.getfixturevalue("spark_s3_store") if kind == "s3" else None)
    first = write_committed(
        df.where("id < 6"), dest_text, partition_by=["part"], committer=committer, options=options
    )
    before = visible_files(store, dest)
    assert first.files == len(before)

    def fail(job, results, config):
        assert len(results) == 2
        raise RuntimeError("driver failed before job commit")

    with pytest.raises(RuntimeError, match="driver failed before job commit"):
        instrumented_write(
            df,
            dest_text,
            WriteInstrumentation(before_job_commit=fail),
            partition_by=["part"],
            committer=committer,
            options={**options, "maxRecordsPerFile": 3},
        )
    # The earlier output is untouched; its _SUCCESS went at job setup (as Hadoop's committers do),
    # so no reader mistakes the destination for the result of the failed job.
    assert visible_files(store, dest) == before
    assert store.get_status(dest.join("_SUCCESS")) is None
    assert_nothing_left_behind(store, dest)

    # A rerun into a clean destination commits exactly once.
    rerun_text = dest_text.rstrip("/") + "-rerun"
    summary = write_committed(
        df,
        rerun_text,
        partition_by=["part"],
        committer=committer,
        options={**options, "maxRecordsPerFile": 3},
    )
    _check(spark, df, kind, rerun_text, summary, request)
