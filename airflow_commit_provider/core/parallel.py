"""The one bounded thread pool: job commit stages, task uploads and cleanup all run on it.

Workers live for one call only (HADOOP-16798): nothing outlives the commit or cleanup that
started it, and no pool is shared between jobs.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
ProgressCallback = Callable[[int, int], None]


class Advances(Protocol):
    """A progress display that is told each time one more item is done."""

    def advance(self, amount: int = 1) -> None: ...


def run_parallel(
    items: Iterable[T],
    action: Callable[[T], object],
    threads: int,
    *,
    total: int | None = None,
    progress: ProgressCallback | None = None,
    progress_interval: float = 5.0,
) -> int:
    """Apply `action` to every item on `threads` workers that live for this call only (HADOOP-16798).

    Each worker takes the next item from the shared iterator, so an iterator of millions of
    entries is consumed one item per worker, in bounded memory, with no per-item futures: at
    job commit the client's CPU is the limit. The first failure stops the others taking new
    items and is re-raised once they have finished. Returns the number of items done.
    """
    source = iter(items)
    lock = threading.Lock()
    done = 0
    failure: BaseException | None = None

    def work() -> None:
        nonlocal done, failure
        while True:
            with lock:
                if failure is not None:
                    return
                try:
                    item = next(source)
                except StopIteration:
                    return
                except BaseException as error:  # a failing source stops the work like a failing action
                    failure = error
                    return
            try:
                action(item)
            except BaseException as error:
                with lock:
                    failure = failure or error
                return
            with lock:
                done += 1

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="commit") as pool:
        workers = [pool.submit(work) for _ in range(threads)]
        while wait(workers, timeout=progress_interval if progress else None).not_done:
            if progress:
                progress(done, total if total is not None else -1)
    if failure is not None:
        raise failure
    if progress:
        progress(done, total if total is not None else done)
    return done


def run_pipelined(
    items: Iterable[T],
    start: Callable[[T], Future[Any]],
    finish: Callable[[T, Future[Any]], object],
    window: int,
    *,
    total: int | None = None,
    progress: ProgressCallback | None = None,
    progress_interval: float = 5.0,
) -> int:
    """`run_parallel` for requests a store can overlap without a thread each (S3 over the CRT).

    One thread keeps `window` requests in flight: `start(item)` sends one and returns its future,
    and `finish(item, future)` reads its outcome in this thread once it is done, in completion
    order. A thread per request in flight costs a wake-up and a GIL hand-over per request, which
    at job commit is most of the client's CPU once requests are sent from native code. The first
    failure stops new requests and is re-raised once those in flight have ended, as in
    `run_parallel`. Returns the number of items finished.
    """
    source = iter(items)
    finished = _Completions[T]()
    in_flight = done = 0
    failure: BaseException | None = None
    exhausted = False
    while True:
        while failure is None and not exhausted and in_flight < window:
            try:
                item = next(source)
                future = start(item)
            except StopIteration:
                exhausted = True
                break
            except BaseException as error:
                failure = error
                break
            in_flight += 1
            future.add_done_callback(functools.partial(finished.add, item))
        if in_flight == 0:
            break
        # Wake for half the window at once, not for each request: a wake-up per request costs the
        # sending thread a context switch and the answering thread a contended GIL.
        batch = finished.take(
            1 if exhausted or failure else max(1, in_flight // 2), progress_interval if progress else None
        )
        if not batch:
            if progress:
                progress(done, total if total is not None else -1)
            continue
        for item, future in batch:
            in_flight -= 1
            if failure is not None:
                continue
            try:
                finish(item, future)
            except BaseException as error:
                failure = error
                continue
            done += 1
    if failure is not None:
        raise failure
    if progress:
        progress(done, total if total is not None else done)
    return done


class _Completions(Generic[T]):
    """Requests whose futures are done, handed to the waiting thread in batches."""

    def __init__(self) -> None:
        self._ready: list[tuple[T, Future[Any]]] = []
        self._condition = threading.Condition(threading.Lock())
        self._wanted = 1

    def add(self, item: T, future: Future[Any]) -> None:
        with self._condition:
            self._ready.append((item, future))
            if len(self._ready) >= self._wanted:
                self._condition.notify()

    def take(self, at_least: int, timeout: float | None) -> list[tuple[T, Future[Any]]]:
        """Wait until `at_least` are done (or `timeout` passed), then take all that are."""
        with self._condition:
            self._wanted = at_least
            self._condition.wait_for(lambda: len(self._ready) >= at_least, timeout)
            ready, self._ready = self._ready, []
            return ready


def completed_future(
    function: Callable[..., R],
    *args: Any,
    errors: Callable[[BaseException], BaseException] | None = None,
) -> Future[R]:
    """The outcome of `function(*args)`, called now, as a finished future (a failure as `errors(it)`)."""
    future: Future[R] = Future()
    try:
        future.set_result(function(*args))
    except Exception as error:
        future.set_exception(errors(error) if errors else error)
    return future


def parallel_map(
    items: Iterable[T], function: Callable[[T], R], threads: int, progress: Advances | None = None
) -> list[R]:
    """`function` over `items` on at most `threads` workers: the results in input order.

    `progress` advances as each item is done. The first failure stops the rest, as in `run_parallel`.
    """
    listed = list(items)
    results: dict[int, R] = {}
    lock = threading.Lock()

    def apply(index: int) -> None:
        results[index] = function(listed[index])
        if progress is not None:
            with lock:
                progress.advance()

    run_parallel(range(len(listed)), apply, max(1, min(threads, len(listed))))
    return [results[index] for index in range(len(listed))]
