"""A live job's uploads and temp tree survive cleanups that run while it writes (embedded S3).

The live job is a real magic-committer job on another thread. Each cleanup calls it back at its
most dangerous moment, after listing and before acting, and waits until it has written more.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest
from cleanup_support import run

from airflow_commit_provider.cleanup import abort_pending_uploads, clean_stale_temp_trees
from airflow_commit_provider.core.committers.magic import MagicCommitter, MagicTaskAttempt
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.s3 import S3Store

pytestmark = pytest.mark.s3


class InterleavingProgress:
    """Runs `step` on another thread, and waits for it, whenever a cleanup phase starts."""

    def __init__(self, step: Callable[[], None], phases: tuple[str, ...]) -> None:
        self.step, self.phases, self.steps = step, phases, 0

    def start(self, description: str, total: int | None) -> None:
        if description in self.phases:
            thread = threading.Thread(target=self.step)
            thread.start()
            thread.join()
            self.steps += 1

    def advance(self, amount: int = 1) -> None:
        return None


def _write(attempt: MagicTaskAttempt, name: str) -> str:
    """Write a file `name` of the attempt; its destination key."""
    with attempt.create_file(name) as stream:
        stream.write(name.encode() * 10)
    return attempt.destination_of(name).key


def test_live_job_survives_concurrent_cleanups(s3_store: S3Store, s3_bucket: str) -> None:
    table = StorePath("s3", s3_bucket, "warehouse/events")
    dead_id, live_id = str(uuid.uuid4()), str(uuid.uuid4())

    dead = MagicCommitter(s3_store, table, dead_id)  # set up, wrote, then was killed
    dead.setup_job()
    dead_attempt = dead.task_attempt(0, 0)
    dead_keys = {
        _write(dead_attempt, f"day=1/part-00000-{dead_id}-c000.json"),
        _write(dead_attempt, "day=2/unnamed.json"),  # found only through the job's upload records
    }

    live = MagicCommitter(s3_store, table, live_id)
    live.setup_job()
    live_attempts = [live.task_attempt(0, 0)]
    live_keys = [_write(live_attempts[0], f"day=1/part-00000-{live_id}-c000.json")]
    counter = iter(range(1, 100))

    def live_step() -> None:
        """The live job keeps working: a new task attempt starts, records and uploads a file."""
        attempt = live.task_attempt(next(counter), 0)
        live_attempts.append(attempt)
        live_keys.append(_write(attempt, f"day=3/part-{len(live_attempts):05d}-{live_id}-c000.json"))

    # 1. The hourly cleanup: real clock, 1 h threshold. Everything is young: nothing is touched.
    progress = InterleavingProgress(live_step, ("Aborting uploads", "Checking and deleting temporary files"))
    uploads = abort_pending_uploads(s3_store, table, older_than="1h", progress=progress)
    trees = clean_stale_temp_trees(s3_store, table, older_than="1h", progress=progress)
    assert (uploads.aborted, uploads.listing.too_recent, trees.to_json()["deleted"]) == (0, 3, 0)

    # 2. Cleanup after the failed job, scoped by its job ID with no age limit, while the live job
    #    writes: only the dead job's uploads go, found by file name and by its upload records.
    report = abort_pending_uploads(
        s3_store, table, older_than="0s", job_id=dead_id, progress=progress, keep_outcomes=True
    )
    assert {o.upload.path.key for o in report.outcomes} == dead_keys
    assert (report.aborted, report.listing.other_jobs) == (2, 3)  # the live job had three when listed
    assert not dead_keys & {u.path.key for u in s3_store.list_multipart_uploads(table)}

    # 3. A clock far ahead, past a 1-day fence for jobs that recorded no timeout, makes every tree
    #    look stale; the live job writes after the listing, so its tree is recognised as active at
    #    delete time. The dead job's tree goes.
    later = datetime.now(timezone.utc) + timedelta(days=3)
    trees = clean_stale_temp_trees(
        s3_store,
        table,
        older_than="1d",
        now=later,
        max_job_duration="1d",
        progress=progress,
        keep_outcomes=True,
    )
    assert {o.tree.job_id: o.status for o in trees.outcomes} == {dead_id: "deleted", live_id: "active"}
    assert progress.steps == 4

    # The live job was never disturbed: every attempt commits and the job commits all its files.
    results = [attempt.commit_task() for attempt in live_attempts]
    success = live.commit_job(results)
    assert success.file_count == len(live_attempts) == 5
    for key in live_keys:
        assert s3_store.get_status(StorePath("s3", s3_bucket, key)) is not None


def test_a_live_jobs_uploads_outlive_a_threshold_shorter_than_the_job(
    s3_store: S3Store, s3_bucket: str, s3_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that runs longer than the cleanup's age threshold keeps its uploads while it is live:
    set up, undecided, and younger than its own timeout (recorded at setup), else the cleanup's
    max_job_duration. The threshold is made small (0s), never the job old."""
    table = StorePath("s3", s3_bucket, "warehouse/long")
    long_id, orphan_id = str(uuid.uuid4()), str(uuid.uuid4())
    long = MagicCommitter(s3_store, table, long_id, CommitOptions(max_job_duration=3 * 3600))
    long.setup_job()
    attempt = long.task_attempt(0, 0)
    long_keys = {
        _write(attempt, f"day=1/part-00000-{long_id}-c000.json"),
        _write(attempt, "day=2/unnamed.json"),  # its job only through the job's upload records
    }
    orphan = MagicCommitter(s3_store, table, orphan_id)  # set up with no timeout, then its driver died
    orphan.setup_job()
    orphan_keys = {_write(orphan.task_attempt(0, 0), f"day=1/part-00000-{orphan_id}-c000.json")}

    # Every upload is older than 0s; both jobs are live (the orphan within the default 7 days).
    report = abort_pending_uploads(s3_store, table, older_than="0s")
    assert (report.aborted, report.listing.live, report.listing.too_recent) == (0, 3, 0)
    code, out, _ = run(
        capsys,
        "uploads",
        "abort",
        table.uri(),
        "--older-than",
        "0s",
        "--yes",
        "--json",
        "--endpoint-url",
        s3_env,
    )
    assert (code, json.loads(out)["aborted"], json.loads(out)["live"]) == (0, 0, 3)

    # Two hours on: the long job is within its own 3 h; the orphan, which recorded none, is past a
    # 1 h fence and taken as dead: only its upload goes.
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    report = abort_pending_uploads(
        s3_store, table, older_than="1h", now=later, max_job_duration="1h", keep_outcomes=True
    )
    assert {o.upload.path.key for o in report.outcomes} == orphan_keys
    assert (report.aborted, report.listing.live) == (1, 2)

    # The long job never lost an upload: it commits every file it wrote.
    long.commit_job([attempt.commit_task()])
    for key in long_keys:
        assert s3_store.get_status(StorePath("s3", s3_bucket, key)) is not None
    assert [u.path.key for u in s3_store.list_multipart_uploads(table)] == []


def test_a_marker_that_is_not_ours_dates_the_job_by_when_it_was_written(
    s3_store: S3Store, s3_bucket: str
) -> None:
    """A job folder whose job.json is not our JSON is still a job: live until the fence, counted from
    when its marker was written, and no longer; it never shields its uploads for ever."""
    table = StorePath("s3", s3_bucket, "warehouse/odd")
    s3_store.write_bytes(table.join("_temporary", "odd-job", "job.json"), b"not json")
    upload = table.join("day=1", "part-00000-odd-job-c000.json")
    s3_store.upload_part(upload, upload_id := s3_store.create_multipart_upload(upload), 1, b"x")
    kept = abort_pending_uploads(s3_store, table, older_than="0s")
    assert (kept.aborted, kept.listing.live) == (0, 1)
    later = datetime.now(timezone.utc) + timedelta(days=8)  # past the default 7-day fence
    gone = abort_pending_uploads(s3_store, table, older_than="0s", now=later)
    assert (gone.aborted, gone.listing.live) == (1, 0)
    assert upload_id not in {u.upload_id for u in s3_store.list_multipart_uploads(table)}
