"""The one bounded thread pool: job commit stages, task uploads and cleanup all run on it.

Workers live for one call only (HADOOP-16798): nothing outlives the commit or cleanup that
started it, and no pool is shared between jobs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Protocol, TypeVar

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
    completed: queue.SimpleQueue[tuple[T, Future[Any]]] = queue.SimpleQueue()
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
            future.add_done_callback(lambda finished, item=item: completed.put((item, finished)))
        if in_flight == 0:
            break
        try:
            item, future = completed.get(timeout=progress_interval if progress else None)
        except queue.Empty:
            if progress:
                progress(done, total if total is not None else -1)
            continue
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


def completed_future(function: Callable[..., R], *args: Any) -> Future[R]:
    """The outcome of `function(*args)`, called now, as a finished future."""
    future: Future[R] = Future()
    try:
        future.set_result(function(*args))
    except Exception as error:
        future.set_exception(error)
    return future


def parallel_map(
    items: Iterable[T], function: Callable[[T], R], threads: int, progress: Advances | None = None
) -> list[R]:
    """`function` over `items` on at most `threads` workers: the results in input order.

    `progress` advances as each item is done. The first failure stops the rest, as in `run_parallel`.
    """
    listed = list(items)
    results: list[R] = [None] * len(listed)  # type: ignore[list-item] - every slot is filled below
    lock = threading.Lock()

    def apply(index: int) -> None:
        results[index] = function(listed[index])
        if progress is not None:
            with lock:
                progress.advance()

    run_parallel(range(len(listed)), apply, max(1, min(threads, len(listed))))
    return results
