"""Cleanup of a million uploads or temporary files under one scope: memory that does not grow with
the count, progress while it runs, and a second run that finishes what an interrupted one left.

Memory is measured through the in-process S3 stand-in (`bench/fake_s3.py`: the real S3Store over
a boto3-shaped client, since 10k real uploads would take longer to make than the suite runs), at
2k and at 10k items: the peak of the Python heap (tracemalloc) must not grow with the count. The
benchmarks measure a million (`bench/results`); 2k is past the sizes at which the fixed costs (a
batch of 1,000 deletes, a spool's page) stop growing, so the curve is flat from there, and 8k
more items are enough for anything kept per item to exceed the slack (an 8-byte reference each
exceeds it).
Everything else runs on the real stores (the embedded S3 and local files), with a wrapper that
makes the store go down, or the process die, after K requests.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from cleanup_support import (
    GoesDown,
    RecordingProgress,
    assert_one_line_error,
    is_pending,
    keys_under,
    run,
    start_upload,
    store_down,
    write_files,
)
from openlineage.client.serde import Serde
from support.faults import FaultInjectingStore, SimulatedCrash

from airflow_commit_provider.cleanup import STOP_AFTER_FAILURES, abort_pending_uploads, clean_stale_temp_trees
from airflow_commit_provider.cleanup import temp_trees as temp_trees_module
from airflow_commit_provider.cleanup.spool import KeySet, Spool, batches
from airflow_commit_provider.cli import cleanup as cleanup_flow
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.lineage import FACET_LOCATIONS, removal_lineage
from airflow_commit_provider.operators import CleanupTemporaryOperator
from airflow_commit_provider.progress import LoggingProgress

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `bench` is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO_ROOT))

from bench.fake_s3 import FakeS3Client  # noqa: E402

SMALL, LARGE = 2_000, 10_000
#: What the larger run's heap peak may exceed the smaller one's by, per item more. Measured: 2 bytes
#: for the uploads and none for the files. Anything kept per item exceeds it: an upload or a file
#: status is a few hundred bytes with its strings, and even a list holding a reference to a string
#: the stand-in already keeps costs 8 bytes a reference and more for the list's spare room (kept
#: in `_list_old_uploads`, the keys of 18,000 more uploads raised the peak by 200 KiB; of 8,000
#: more, by 123 KiB against this slack of 47 KiB; in `_contents`, the 8,000 more files by 89 KiB).
SLACK_PER_ITEM = 6
SLACK = SLACK_PER_ITEM * (LARGE - SMALL)
#: After the fake store's fixed `Initiated` and modification times (2026-01-01): everything is old.
LATER = datetime(2026, 1, 3, tzinfo=timezone.utc)
SCOPE = "s3://lake/out/dataset1"


def _heap_peak(action: Callable[[], Any]) -> tuple[int, Any]:
    """The Python heap's peak while `action` runs, above what was allocated before; and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        result = action()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def _uploads(count: int) -> FakeS3Client:
    """`count` pending uploads in a hundred partitions of out/dataset1, and one in out/dataset10."""
    uploads = {
        f"upload-{i:08d}": ("lake", f"out/dataset1/dt={i % 100:03d}/part-{i:07d}.parquet")
        for i in range(count)
    }
    uploads["upload-neighbour"] = ("lake", "out/dataset10/part-0.parquet")
    return FakeS3Client(uploads=uploads)


@pytest.mark.slow
def test_aborting_uploads_takes_the_same_memory_at_five_times_the_count() -> None:
    peaks = {}
    for count in (SMALL, LARGE):
        client = _uploads(count)
        store = S3Store(client=client)
        peaks[count], report = _heap_peak(
            lambda store=store: abort_pending_uploads(store, SCOPE, older_than="1d", now=LATER, threads=8)
        )
        assert (report.aborted, report.count("failed"), report.listing.count) == (count, 0, count)
        assert list(client.uploads) == ["upload-neighbour"], "only out/dataset1 was in scope"
        # What leaves the worker stays small: the XCom report, and the lineage dataset's facets.
        assert len(json.dumps(report.to_json())) < 4096 and len(report.to_json()["sample"]) == 20
        [dropped] = (Serde.to_dict(d) for d in removal_lineage(report).inputs)
        assert dropped["inputFacets"]["inputStatistics"]["fileCount"] == count
        assert len(dropped["inputFacets"]["subset"]["inputCondition"]["locations"]) == FACET_LOCATIONS
        report.close()
    assert peaks[LARGE] <= peaks[SMALL] + SLACK, {n: f"{p / 1024:,.0f} KiB" for n, p in peaks.items()}


def _tree(count: int) -> FakeS3Client:
    """One job's temporary tree of `count` files in out/dataset1, with a table file beside it and
    another table's tree in out/dataset10."""
    tree = "out/dataset1/_temporary/job-1/00/tasks/attempt_0"
    objects: dict[tuple[str, str], bytes | int] = {
        ("lake", f"{tree}/dt={i % 100:03d}/part-{i:07d}.parquet"): b"x" * 10 for i in range(count)
    }
    objects[("lake", "out/dataset1/data/part-0.parquet")] = b"data"
    objects[("lake", "out/dataset10/_temporary/job-2/part-0")] = b"neighbour"
    return FakeS3Client(objects, deletes=True)


@pytest.mark.slow
def test_deleting_a_temporary_tree_takes_the_same_memory_at_five_times_the_files() -> None:
    peaks = {}
    for count in (SMALL, LARGE):
        client = _tree(count)
        store = S3Store(client=client)
        peaks[count], report = _heap_peak(
            lambda store=store: clean_stale_temp_trees(store, SCOPE, older_than="1d", now=LATER, threads=8)
        )
        summary = report.to_json()
        assert (summary["deleted"], summary["files"], summary["bytes"]) == (1, count, 10 * count)
        assert sorted(key for _bucket, key in client.objects) == [
            "out/dataset1/data/part-0.parquet",
            "out/dataset10/_temporary/job-2/part-0",
        ]
        requests = store.statistics.snapshot()
        assert requests["op_delete"] == -(-count // 1000), "one DeleteObjects per 1,000 files"
        report.close()
    assert peaks[LARGE] <= peaks[SMALL] + SLACK, {n: f"{p / 1024:,.0f} KiB" for n, p in peaks.items()}


def test_the_spool_and_the_key_set_keep_items_on_local_disk() -> None:
    spool = Spool(range(2500))  # more than one pickled block
    assert os.fstat(spool._file.fileno()).st_nlink == 0, "unlinked: a killed process leaves no file"
    reading = iter(spool)
    assert [next(reading) for _ in range(3)] == [0, 1, 2]
    spool.extend(range(2500, 2600))  # appends do not disturb a reading under way, which ends where it began
    assert list(reading) == list(range(3, 2500))
    assert list(spool) == list(range(2600)) and len(spool) == 2600 and spool.head(2) == [0, 1]
    spool.close()

    keys = KeySet(f"key-{i:05d}" for i in range(2500, -1, -1))
    keys.update(["key-00007", "another"])  # already there: still once
    assert len(keys) == 2502 and "key-02500" in keys and "key-2500" not in keys
    assert list(keys) == ["another", *(f"key-{i:05d}" for i in range(2501))], "sorted, over several pages"
    keys.close()
    assert [len(batch) for batch in batches(range(2500), 1000)] == [1000, 1000, 500]


# Interrupted runs ---------------------------------------------------------------------------------
def _table_of_uploads(store: Store, table: StorePath, count: int) -> set[str]:
    return {start_upload(store, table.join(f"dt={i % 4}/part-{i:03d}"), size=10) for i in range(count)}


@pytest.mark.s3
def test_a_store_down_half_way_stops_the_abort_and_the_next_run_finishes(
    s3_store: S3Store, s3_bucket: str
) -> None:
    count, healthy = STOP_AFTER_FAILURES + 70, 30
    table = StorePath("s3", s3_bucket, "out/dataset1")
    ids = _table_of_uploads(s3_store, table, count)
    neighbour_path = StorePath("s3", s3_bucket, "out/dataset10/part-0")
    neighbour = start_upload(s3_store, neighbour_path)

    down = GoesDown(s3_store, "abort_multipart_upload", healthy, store_down)
    first = abort_pending_uploads(down, table, older_than="0s", threads=1, retry_delay=0, keep_outcomes=True)
    untried = count - healthy - STOP_AFTER_FAILURES
    summary = first.to_json()
    assert (summary["aborted"], summary["failed"], summary["not_tried"]) == (
        0,
        healthy + STOP_AFTER_FAILURES,
        untried,
    ), "the aborts that took effect could not be checked: the store was down"
    # What took effect stayed done; the rest is pending, untouched.
    pending = {u.upload_id for u in s3_store.list_multipart_uploads(table)}
    assert len(pending) == count - healthy and pending < ids
    unchecked = {
        o.upload.upload_id for o in first.outcomes if (o.error or "").startswith("abort not verified")
    }
    assert len(unchecked) == healthy and not unchecked & pending
    assert {o.upload.upload_id for o in first.outcomes if o.status == "not-tried"} < pending
    message = first.failure_message() or ""
    assert (
        f"stopped after {STOP_AFTER_FAILURES} failures in a row with {untried} uploads not tried" in message
    )
    assert "run it again to finish" in first.describe()

    second = abort_pending_uploads(s3_store, table, older_than="0s", retry_delay=0)
    assert (second.aborted, second.vanished, second.count("failed"), second.count("not-tried")) == (
        count - healthy,
        0,
        0,
        0,
    )
    assert list(s3_store.list_multipart_uploads(table)) == []
    assert is_pending(s3_store, neighbour_path, neighbour), "out/dataset10 is another scope"


@pytest.mark.s3
def test_a_worker_killed_mid_abort_leaves_nothing_half_done(s3_store: S3Store, s3_bucket: str) -> None:
    count, killed_at = 40, 15
    table = StorePath("s3", s3_bucket, "out/dataset1")
    _table_of_uploads(s3_store, table, count)
    aborts = iter(range(count))
    faults = FaultInjectingStore(s3_store)  # the 15th abort takes effect, then the process dies
    faults.inject(
        when=lambda call: call.op == "abort_multipart_upload" and next(aborts) == killed_at - 1,
        mode="crash_after",
    )
    with pytest.raises(SimulatedCrash):
        abort_pending_uploads(faults, table, older_than="0s", threads=4, retry_delay=0)
    assert len(list(s3_store.list_multipart_uploads(table))) == count - killed_at

    # The retry (a new process): exactly the uploads left, none of them an error.
    again = abort_pending_uploads(s3_store, table, older_than="0s", threads=4, retry_delay=0)
    assert (again.aborted, again.vanished, again.count("failed")) == (count - killed_at, 0, 0)
    assert list(s3_store.list_multipart_uploads(table)) == []


def test_ctrl_c_in_the_cli_says_how_to_finish_and_the_same_command_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, table = LocalStore(), StorePath.parse(str(tmp_path / "out" / "dataset1"))
    count, interrupted_at = 12, 5
    _table_of_uploads(store, table, count)
    argv = ("uploads", "abort", str(table), "--older-than", "0s", "--yes", "--threads", "1")

    interrupting = GoesDown(store, "abort_multipart_upload", interrupted_at, KeyboardInterrupt)
    monkeypatch.setattr(cleanup_flow, "store_for", lambda args, where: interrupting)
    code, out, err = run(capsys, *argv)
    assert code == 130 and out == ""
    assert_one_line_error(err, "interrupted: what was done stays done", "run the same command again")
    assert len(list(store.list_multipart_uploads(table))) == count - interrupted_at

    monkeypatch.undo()
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    assert f"Aborted {count - interrupted_at} uploads" in out and "0 vanished meanwhile" in out
    assert list(store.list_multipart_uploads(table)) == []


@pytest.mark.parametrize("failure", [KeyboardInterrupt, store_down], ids=["interrupted", "store-down"])
def test_an_interrupted_tree_delete_is_finished_by_the_next_run(
    store_root: tuple[Store, StorePath], failure: Callable[[], BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(temp_trees_module, "DELETE_CHUNK", 10)
    store, root = store_root
    table, neighbour = root.join("out/dataset1"), root.join("out/dataset10")
    tree = [f"_temporary/job-1/00/tasks/a/part-{i:02d}" for i in range(35)]
    write_files(store, table, [*tree, "data/part-0"])
    write_files(store, neighbour, ["_temporary/job-1/00/f"])
    later = datetime.now(timezone.utc) + timedelta(days=2)

    down = GoesDown(store, "delete_files", 1, failure)  # the first chunk goes, then the second fails
    if failure is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            clean_stale_temp_trees(down, table, older_than="1d", now=later, threads=1)
    else:
        report = clean_stale_temp_trees(down, table, older_than="1d", now=later, threads=1)
        assert (report.count("failed"), report.to_json()["deleted"]) == (1, 0)
        assert "ServiceUnavailable" in (report.failure_message() or "")
    left = keys_under(store, table)
    assert len(left) == 26 and left <= {*tree, "data/part-0"}, "one chunk deleted, nothing else"

    report = clean_stale_temp_trees(store, table, older_than="1d", now=later)
    assert (report.to_json()["deleted"], report.to_json()["files"]) == (1, 25)
    assert keys_under(store, table) == {"data/part-0"}
    assert keys_under(store, neighbour) == {"_temporary/job-1/00/f"}


# Progress -------------------------------------------------------------------------------------------
def test_progress_counts_every_upload_listed_and_aborted() -> None:
    progress = RecordingProgress()
    store = S3Store(client=_uploads(2500))
    report = abort_pending_uploads(store, SCOPE, older_than="1d", now=LATER, progress=progress)
    assert report.aborted == 2500
    assert progress.step("Listing uploads") == (None, 2500)
    assert progress.step("Aborting uploads") == (2500, 2500)
    assert progress.step("Checking aborts") == (None, 0), "the second listing found none left"


def test_progress_counts_every_file_listed_and_deleted(tmp_path: Path) -> None:
    store, table = LocalStore(), StorePath.parse(str(tmp_path / "table"))
    write_files(store, table, [f"_temporary/job-{i % 3}/f{i}" for i in range(30)] + ["data/f"])
    progress = RecordingProgress()
    report = clean_stale_temp_trees(store, table, older_than="0s", progress=progress)
    assert report.to_json()["deleted"] == 3
    assert progress.step("Scanning temporary trees") == (None, 30)
    assert progress.step("Checking and deleting temporary files") == (60, 60), (
        "each file listed, then deleted"
    )


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, event: Any, *args: Any) -> None:
        self.lines.append(event % args)


def test_progress_lines_say_how_far_and_how_fast() -> None:
    log, clock = _Lines(), [100.0]
    progress = LoggingProgress(log, interval=30, clock=lambda: clock[0])
    progress.start("Aborting uploads", 1_000_000)
    progress.advance(119_999)
    clock[0] += 29
    progress.advance()  # under 30 s since the step began: no line yet
    assert log.lines == []
    clock[0] += 71
    progress.advance(80_000)
    assert log.lines == ["Aborting uploads: 200,000 of 1,000,000 (20%) in 100s, 2,000/s"]
    clock[0] += 10
    progress.start("Checking aborts", None)
    progress.advance(1000)
    clock[0] += 2
    progress.close()
    assert log.lines[1:] == [
        "Aborting uploads: done: 200,000 of 1,000,000 (20%) in 110s, 1,818/s",
        "Checking aborts: done: 1,000 in 2s, 500/s",
    ]


def test_the_operators_log_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, table = LocalStore(), StorePath.parse(str(tmp_path / "table"))
    write_files(store, table, [f"_temporary/job-1/f{i}" for i in range(12)])
    op = CleanupTemporaryOperator(task_id="clean", scope=table.key, older_than="0s", progress_interval=0)
    assert op.execute(context={})["files"] == 12
    logged = capsys.readouterr().out  # the task logger (structlog) writes to stdout here
    assert "Scanning temporary trees: done: 12 in " in logged, logged
    assert "Checking and deleting temporary files: done: 24 of 24 (100%) in " in logged
    assert "/s" in logged
