"""Overlapped part uploads in the magic committer's stream, on the local store and the embedded S3.

The stream keeps up to `parts_in_flight` parts uploading while the writer fills the next. These
tests hold parts back in a wrapping store (events, never sleeps) to make parts finish out of
order, fill the in-flight limit, fail a middle part and discard with parts still being sent,
and check what the committer promises: ETags in part order, bounded memory, nothing published
or left pending after a failure or a discard, and byte-exact output after job commit.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import pytest
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_committed, pending_uploads
from support.stores import DelegatingStore
from support.workload import JobRun

from airflow_commit_provider.core.committers import magic
from airflow_commit_provider.core.committers.magic import MagicOutputStream, MagicTaskAttempt
from airflow_commit_provider.core.options import S3_MIN_PART_SIZE, CommitOptions
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store, StoreError
from airflow_commit_provider.spark.config import CONF_PARTS_IN_FLIGHT
from airflow_commit_provider.spark.write_options import commit_options

PART = S3_MIN_PART_SIZE
WRITE = 1024 * 1024
#: Longest a test waits for another thread before it fails instead of hanging.
TIMEOUT = 60


class PartFailure(StoreError):
    """An injected UploadPart failure."""


class PartControl(DelegatingStore):
    """Holds UploadPart calls back and watches them.

    A part waits at `gates[number]` if there is one, and until `allowed` reaches its number while
    `allowed` is not None (parts are let through in order, as a writer waits for them); parts in
    `fail` raise PartFailure instead of reaching the store. Recorded: parts running at
    once, the thread and order of each part, and any part running when its upload is aborted or
    starting after it (`violations`: an aborted upload must not get parts back).
    """

    def __init__(self, inner: Store, fail: Iterable[int] = ()) -> None:
        super().__init__(inner)
        self.fail = set(fail)
        self.gates: dict[int, threading.Event] = {}
        self.allowed: int | None = None
        self.cond = threading.Condition()
        self.running = 0
        self.waiting = 0
        self.max_running = 0
        self.finished_bytes = 0
        self.sent: list[tuple[str, int]] = []
        self.finished: list[int] = []
        self.etags: dict[int, str] = {}
        self.threads: dict[int, threading.Thread] = {}
        self.violations: list[str] = []
        self._running_by_upload: Counter[str] = Counter()
        self._aborted: set[str] = set()

    def upload_part(self, path: StorePath, upload_id: str, part_number: int, data: bytes) -> str:
        with self.cond:
            if upload_id in self._aborted:
                self.violations.append(f"part {part_number} started after its upload was aborted")
            self.running += 1
            self._running_by_upload[upload_id] += 1
            self.max_running = max(self.max_running, self.running)
            self.sent.append((upload_id, part_number))
            self.threads[part_number] = threading.current_thread()
            self.cond.notify_all()
        try:
            self._hold(part_number)
            if part_number in self.fail:
                raise PartFailure(f"UploadPart {part_number} of upload {upload_id} to {path}: injected")
            etag = self.inner.upload_part(path, upload_id, part_number, data)
            with self.cond:
                self.etags[part_number] = etag
                self.finished_bytes += len(data)
            return etag
        finally:
            with self.cond:
                self.running -= 1
                self._running_by_upload[upload_id] -= 1
                self.finished.append(part_number)
                self.cond.notify_all()

    def _hold(self, part_number: int) -> None:
        gate = self.gates.get(part_number)
        if gate is not None:
            assert gate.wait(TIMEOUT), f"part {part_number} was never let through"
        with self.cond:
            self.waiting += 1
            self.cond.notify_all()
            try:
                released = self.cond.wait_for(
                    lambda: self.allowed is None or part_number <= self.allowed, TIMEOUT
                )
                assert released, f"part {part_number} was never let through"
            finally:
                self.waiting -= 1

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        with self.cond:
            if self._running_by_upload[upload_id]:
                self.violations.append(
                    f"upload aborted with {self._running_by_upload[upload_id]} parts still being sent"
                )
            self._aborted.add(upload_id)
        self.inner.abort_multipart_upload(path, upload_id)

    def wait_for(self, predicate: Callable[[], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, TIMEOUT), "the stream stopped making progress"


def start(env: CommitEnv, store: Store, in_flight: int) -> JobRun:
    job = JobRun.create("magic", store, env.dest, env.options(part_size=PART, parts_in_flight=in_flight))
    job.committer.setup_job()
    return job


def task(job: JobRun, number: int = 0) -> MagicTaskAttempt:
    attempt = job.committer.task_attempt(number, 0)
    assert isinstance(attempt, MagicTaskAttempt)
    attempt.setup_task()
    return attempt


def data_of(size: int, seed: int = 0) -> bytes:
    """Bytes that differ from part to part, so a part stored under the wrong number shows."""
    block = bytes((seed + i) % 251 for i in range(4099))
    return (block * (size // len(block) + 1))[:size]


def write_in_pieces(stream: MagicOutputStream, data: bytes, piece: int = WRITE) -> None:
    for start in range(0, len(data), piece):
        stream.write(data[start : start + piece])


def run_in_thread(action: Callable[[], Any]) -> Future[Any]:
    """Run `action` on a new thread; its result or error arrives in the returned future."""
    done: Future[Any] = Future()

    def target() -> None:
        try:
            done.set_result(action())
        except BaseException as error:
            done.set_exception(error)

    threading.Thread(target=target, daemon=True).start()
    return done


# Order and threads ---------------------------------------------------------------------------------
def test_etags_stay_in_part_order_when_parts_finish_out_of_order(commit_env: CommitEnv) -> None:
    """Part 1 may finish only after part 2 has: the pending commit still lists part 1's ETag first
    and the completed object is byte-exact."""
    store = PartControl(commit_env.store)
    second_done = threading.Event()
    store.gates[1] = second_done
    job = start(commit_env, store, in_flight=4)
    attempt = task(job)
    data = data_of(3 * PART + 12345)
    with attempt.create_file("out.bin") as stream:
        write_in_pieces(stream, data[: 2 * PART])
        store.wait_for(lambda: 2 in store.finished)
        second_done.set()
        write_in_pieces(stream, data[2 * PART :])
        assert stream.tell() == len(data)
    assert store.finished.index(2) < store.finished.index(1)
    [pending] = attempt.pending_commits()
    assert pending.etags == tuple(store.etags[n] for n in (1, 2, 3, 4))
    assert pending.length == len(data)
    job.committer.commit_job([attempt.commit_task()])
    assert_committed(commit_env.store, commit_env.dest, {"out.bin": data})
    assert not store.violations


@pytest.mark.parametrize("in_flight", [1, 3])
def test_who_uploads_the_parts(commit_env: CommitEnv, in_flight: int) -> None:
    """One part in flight is the synchronous stream: the writer sends every part itself. With more,
    full parts go to the attempt's upload threads and close sends the last part itself."""
    store = PartControl(commit_env.store)
    job = start(commit_env, store, in_flight=in_flight)
    attempt = task(job)
    data = data_of(3 * PART + 1)
    with attempt.create_file("out.bin") as stream:
        write_in_pieces(stream, data)
    writer = threading.current_thread()
    on_writer = [n for n in sorted(store.threads) if store.threads[n] is writer]
    assert on_writer == ([1, 2, 3, 4] if in_flight == 1 else [4])
    job.committer.commit_job([attempt.commit_task()])
    assert_committed(commit_env.store, commit_env.dest, {"out.bin": data})


# Memory bound --------------------------------------------------------------------------------------
def test_memory_stays_bounded_when_the_store_is_slower_than_the_writer(commit_env: CommitEnv) -> None:
    """Every part is held until the test lets one through, and only once the writer has filled the
    in-flight limit: the writer must wait for the oldest part, so parts in flight never exceed
    the limit and the bytes it accepted but the store has not yet taken stay within (limit + 1)
    parts. An unbounded queue would accept the whole file while the parts are held."""
    limit = 2
    store = PartControl(commit_env.store)
    store.allowed = 0
    job = start(commit_env, store, in_flight=limit)
    attempt = task(job)
    data = data_of(6 * PART + 777)
    stream = attempt.create_file("out.bin")
    closing = threading.Event()

    def write_and_close() -> None:
        write_in_pieces(stream, data)
        with store.cond:
            closing.set()
            store.cond.notify_all()
        stream.close()

    writer = run_in_thread(write_and_close)
    held: list[int] = []
    times_at_limit = 0
    while True:
        store.wait_for(lambda: closing.is_set() or store.waiting >= limit)
        with store.cond:
            held.append(stream.tell() - store.finished_bytes)
            if closing.is_set():
                store.allowed = None
                store.cond.notify_all()
                break
            assert store.running <= limit
            times_at_limit += 1
            store.allowed += 1
            store.cond.notify_all()
    writer.result(TIMEOUT)
    assert times_at_limit >= 4, "the writer never had to wait at the limit"
    assert max(held) <= (limit + 1) * PART, f"held {max(held)} bytes, bound {(limit + 1) * PART}"
    # the limit from the upload threads, plus the last part that close sends itself
    assert store.max_running <= limit + 1
    job.committer.commit_job([attempt.commit_task()])
    assert_committed(commit_env.store, commit_env.dest, {"out.bin": data})


# Failures ------------------------------------------------------------------------------------------
def test_failed_middle_part_fails_close_and_publishes_nothing(commit_env: CommitEnv) -> None:
    """Part 2 fails after every write returned: close raises its error naming the file, the upload
    is aborted once no part of it is arriving, and job commit makes only the other file visible."""
    store = PartControl(commit_env.store, fail=[2])
    writes_done = threading.Event()
    store.gates[2] = writes_done
    job = start(commit_env, store, in_flight=3)
    attempt = task(job)
    good = data_of(1000, seed=1)
    with attempt.create_file("good.bin") as stream:
        stream.write(good)
    stream = attempt.create_file("bad.bin")
    write_in_pieces(stream, data_of(3 * PART + 5))
    writes_done.set()
    with pytest.raises(PartFailure, match=r"bad\.bin"):
        stream.close()
    assert stream.closed
    assert [p.destination_key for p in attempt.pending_commits()] == [commit_env.dest.join("good.bin").key]
    job.committer.commit_job([attempt.commit_task()])
    assert_committed(commit_env.store, commit_env.dest, {"good.bin": good})
    assert not store.violations


def test_failure_stops_the_writer_and_task_abort_leaves_nothing(commit_env: CommitEnv) -> None:
    """Part 1 fails: a write raises by the time the limit is reached, no part past the limit is
    sent, later writes and close raise the same error at once, and task abort leaves no upload."""
    limit = 2
    store = PartControl(commit_env.store, fail=[1])
    job = start(commit_env, store, in_flight=limit)
    attempt = task(job)
    data = data_of(6 * PART)
    stream = attempt.create_file("out.bin")
    with pytest.raises(PartFailure) as failed:
        write_in_pieces(stream, data)
    assert stream.tell() < len(data)
    with pytest.raises(PartFailure) as again:
        stream.write(b"more")
    assert again.value is failed.value
    with pytest.raises(PartFailure) as on_close:
        stream.close()
    assert on_close.value is failed.value
    sent = {number for _, number in store.sent}
    assert sent <= {1, 2}, f"parts {sorted(sent)} were sent after part 1 failed with a limit of {limit}"
    assert not list(attempt.pending_commits())
    attempt.abort_task()
    assert pending_uploads(commit_env.store, commit_env.dest) == []
    assert not store.violations


# Discard and garbage collection --------------------------------------------------------------------
def test_discard_waits_for_parts_being_sent_and_cancels_queued_ones(
    commit_env: CommitEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stream A has three parts held in the store (every upload thread busy); stream B's part is
    queued behind them. Discarding B cancels its part unsent; discarding A waits until its parts
    are back before aborting, so no part reaches an aborted upload. Nothing is left pending."""
    store = PartControl(commit_env.store)
    release = threading.Event()
    for number in (1, 2, 3):
        store.gates[number] = release
    job = start(commit_env, store, in_flight=3)
    attempt = task(job)
    first = attempt.create_file("a.bin")
    write_in_pieces(first, data_of(3 * PART))
    store.wait_for(lambda: store.running == 3)
    second = attempt.create_file("b.bin")
    second.write(data_of(PART))
    second.discard()
    assert {upload for upload, _ in store.sent} == {first.upload_id}, "B's queued part was sent"

    waiting = threading.Event()
    real_wait = magic.wait

    def observed_wait(parts: Any, *args: Any, **kwargs: Any) -> Any:
        if any(not part.done() for part in parts):
            waiting.set()
        return real_wait(parts, *args, **kwargs)

    monkeypatch.setattr(magic, "wait", observed_wait)
    discarding = run_in_thread(first.discard)
    assert waiting.wait(TIMEOUT), "discard did not wait for the parts being sent"
    release.set()
    discarding.result(TIMEOUT)
    assert not store.violations
    attempt.abort_task()
    assert pending_uploads(commit_env.store, commit_env.dest) == []


def test_collected_stream_neither_blocks_nor_is_kept_alive_by_its_parts(commit_env: CommitEnv) -> None:
    """A stream dropped with parts held in the store is collected at once: its finalizer does not
    wait for them and the upload threads do not reference it. Task abort then removes its upload."""
    store = PartControl(commit_env.store)
    release = threading.Event()
    store.gates[1] = store.gates[2] = release
    job = start(commit_env, store, in_flight=2)
    attempt = task(job)
    stream = MagicOutputStream(attempt, commit_env.dest.join("dropped.bin"))
    write_in_pieces(stream, data_of(2 * PART))
    store.wait_for(lambda: store.running == 2)
    collected = weakref.ref(stream)
    del stream
    gc.collect()
    assert collected() is None
    release.set()
    store.wait_for(lambda: store.running == 0)
    attempt.abort_task()
    assert pending_uploads(commit_env.store, commit_env.dest) == []


# The whole protocol --------------------------------------------------------------------------------
@pytest.mark.parametrize("in_flight", [1, 3])
def test_job_of_multipart_files_commits_byte_exact(commit_env: CommitEnv, in_flight: int) -> None:
    """Two tasks, files of several parts written in small pieces, in one write larger than two
    parts, in odd sizes, and a file smaller than a part: job commit makes them visible byte-exact."""
    job = start(commit_env, commit_env.store, in_flight=in_flight)
    expected = {
        "dt=1/a.bin": data_of(2 * PART + PART // 2, seed=1),
        "dt=1/small.bin": b"small file",
        "dt=2/b.bin": data_of(3 * PART + 3, seed=2),
    }
    first, second = task(job, 0), task(job, 1)
    with first.create_file("dt=1/a.bin") as stream:
        write_in_pieces(stream, expected["dt=1/a.bin"])
    with first.create_file("dt=1/small.bin") as stream:
        stream.write(expected["dt=1/small.bin"])
    with second.create_file("dt=2/b.bin") as stream:
        b = expected["dt=2/b.bin"]
        stream.write(b[: 2 * PART + 7])
        write_in_pieces(stream, b[2 * PART + 7 :], piece=333_333)
    job.committer.commit_job([first.commit_task(), second.commit_task()])
    assert_committed(commit_env.store, commit_env.dest, expected)


# The option ----------------------------------------------------------------------------------------
def test_parts_in_flight_option() -> None:
    assert CommitOptions().parts_in_flight == 4
    with pytest.raises(ValueError, match="parts_in_flight must be at least 1, got 0"):
        CommitOptions(parts_in_flight=0)
    conf = {CONF_PARTS_IN_FLIGHT: "2"}
    assert commit_options({}, conf).parts_in_flight == 2
    assert commit_options({"parts_in_flight": 1}, conf).parts_in_flight == 1
    with pytest.raises(ValueError, match="parts_in_flight must be an integer, got 'many'"):
        commit_options({"parts_in_flight": "many"}, {})
    with pytest.raises(ValueError, match="parts_in_flight must be at least 1"):
        commit_options({}, {CONF_PARTS_IN_FLIGHT: "-1"})
