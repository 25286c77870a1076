"""The one thread pool (commit stages, task uploads, cleanup): every item exactly once, bounded, and failures stop the work."""

from __future__ import annotations

import itertools
import queue
import threading
from concurrent.futures import Future

import pytest

from airflow_commit_provider.core.parallel import completed_future, parallel_map, run_parallel, run_pipelined


def test_every_item_is_done_exactly_once() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def record(item: int) -> None:
        with lock:
            seen.append(item)

    assert run_parallel(range(5000), record, 8) == 5000
    assert sorted(seen) == list(range(5000))


def test_first_failure_stops_an_endless_source_and_is_raised() -> None:
    """The source never ends: only the failure stopping the workers lets the call return."""
    taken = itertools.count()

    def fail_at_100(item: int) -> None:
        if item == 100:
            raise ValueError("entry 100 is bad")

    with pytest.raises(ValueError, match="entry 100"):
        run_parallel((next(taken) for _ in itertools.repeat(None)), fail_at_100, 4)


def test_a_failing_source_fails_the_call() -> None:
    def source():
        yield 1
        raise KeyError("spool line 2 is corrupt")

    with pytest.raises(KeyError, match="spool line 2"):
        run_parallel(source(), lambda item: None, 4)


def test_progress_ends_with_the_final_count() -> None:
    reports: list[tuple[int, int]] = []
    run_parallel(
        range(10), lambda item: None, 3, total=10, progress=lambda done, total: reports.append((done, total))
    )
    assert reports[-1] == (10, 10)


def test_parallel_map_keeps_input_order_and_advances_once_per_item() -> None:
    class Count:
        done = 0

        def advance(self, amount: int = 1) -> None:
            self.done += amount

    progress = Count()
    assert parallel_map(range(200), lambda item: item * 2, 8, progress) == [item * 2 for item in range(200)]
    assert progress.done == 200


# run_pipelined: requests in flight from one thread --------------------------------------------------
class AnsweredLater:
    """Requests answered from another thread, newest first within each batch, as the CRT's may be."""

    def __init__(self, fail: int | None = None) -> None:
        self.fail = fail
        self.started: queue.SimpleQueue[tuple[int, Future[int]] | None] = queue.SimpleQueue()
        self.futures: list[Future[int]] = []
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()
        self.answerer = threading.Thread(target=self._answer)
        self.answerer.start()

    def start(self, item: int) -> Future[int]:
        future: Future[int] = Future()
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.futures.append(future)
        self.started.put((item, future))
        return future

    def stop(self) -> None:
        self.started.put(None)
        self.answerer.join()

    def _answer(self) -> None:
        stopping = False
        while not stopping:
            batch = [self.started.get()]
            while not self.started.empty():
                batch.append(self.started.get())
            stopping = None in batch
            for started in reversed(batch):
                if started is not None:
                    self._settle(*started)

    def _settle(self, item: int, future: Future[int]) -> None:
        with self.lock:
            self.in_flight -= 1
        if item == self.fail:
            future.set_exception(ValueError(f"request {item} failed"))
        else:
            future.set_result(item * 10)


def test_pipelined_finishes_every_item_once_with_at_most_window_in_flight() -> None:
    requests = AnsweredLater()
    finished: list[int] = []
    try:
        done = run_pipelined(range(3000), requests.start, lambda _i, f: finished.append(f.result() // 10), 16)
    finally:
        requests.stop()
    assert done == 3000 and sorted(finished) == list(range(3000))
    assert requests.most_in_flight <= 16


def test_pipelined_failure_stops_new_requests_and_is_raised_after_those_in_flight() -> None:
    requests = AnsweredLater(fail=500)
    try:
        with pytest.raises(ValueError, match="request 500 failed"):
            run_pipelined(itertools.count(), requests.start, lambda _i, f: f.result(), 8)
        assert all(future.done() for future in requests.futures), "raised while requests were in flight"
        assert len(requests.futures) < 500 + 8 + 1, "requests went on being sent after the failure"
    finally:
        requests.stop()


def test_pipelined_start_failure_and_progress() -> None:
    def start(item: int) -> Future[int]:
        if item == 7:
            raise KeyError("cannot send 7")
        return completed_future(lambda: item)

    with pytest.raises(KeyError, match="cannot send 7"):
        run_pipelined(range(100), start, lambda _i, f: f.result(), 4)
    reports: list[tuple[int, int]] = []
    done = run_pipelined(
        range(50),
        lambda i: completed_future(lambda: i),
        lambda _i, f: f.result(),
        4,
        total=50,
        progress=lambda d, t: reports.append((d, t)),
    )
    assert done == 50 and reports[-1] == (50, 50)
