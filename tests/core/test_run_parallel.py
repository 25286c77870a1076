"""The one thread pool (commit stages, task uploads, cleanup): every item exactly once, bounded, and failures stop the work."""

from __future__ import annotations

import itertools
import threading

import pytest

from airflow_commit_provider.core.parallel import parallel_map, run_parallel


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
