"""Helpers for the cleanup tests: making uploads and trees, stores that inject races and failures,
recording progress, running the CLI."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from support.faults import InjectedFault
from support.stores import DelegatingStore

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store, UploadedPart
from airflow_commit_provider.core.store.s3 import S3Store

R = TypeVar("R")


def start_upload(store: Store, path: StorePath, parts: int = 1, size: int = 1000) -> str:
    """A pending upload with `parts` parts of `size` bytes."""
    upload_id = store.create_multipart_upload(path)
    for number in range(1, parts + 1):
        store.upload_part(path, upload_id, number, bytes([number % 256]) * size)
    return upload_id


def is_pending(store: Store, path: StorePath, upload_id: str) -> bool:
    return any(u.upload_id == upload_id for u in store.list_multipart_uploads(path.parent))


def write_files(store: Store, root: StorePath, relative: Iterable[str], data: bytes = b"x" * 10) -> None:
    for name in relative:
        store.write_bytes(root.join(name), data)


def keys_under(store: Store, root: StorePath) -> set[str]:
    return {status.path.relative_to(root) for status in store.list_files(root)}


class HookedStore(DelegatingStore):
    """Runs `before[method](path, upload_id)` once per upload before delegating that method."""

    def __init__(self, inner: Store, before: dict[str, Callable[[StorePath, str], None]]) -> None:
        super().__init__(inner)
        self.before = before
        self.calls: dict[str, int] = {}

    def _hook(self, method: str, path: StorePath, upload_id: str) -> None:
        key = f"{method}:{upload_id}"
        self.calls[key] = self.calls.get(key, 0) + 1
        if method in self.before:
            self.before[method](path, upload_id)

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self._hook("abort", path, upload_id)
        self.inner.abort_multipart_upload(path, upload_id)

    def list_parts(self, path: StorePath, upload_id: str) -> list[UploadedPart]:
        self._hook("list_parts", path, upload_id)
        return self.inner.list_parts(path, upload_id)


class LosesFirstAbort(HookedStore):
    """The first abort of each upload is lost, as when a part upload races with it."""

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self._hook("abort", path, upload_id)
        if self.calls[f"abort:{upload_id}"] > 1:
            self.inner.abort_multipart_upload(path, upload_id)


class NeverAborts(HookedStore):
    """Aborts of the given upload are answered as done but never take effect."""

    def __init__(self, inner: Store, stuck: str) -> None:
        super().__init__(inner, {})
        self.stuck = stuck

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self._hook("abort", path, upload_id)
        if upload_id != self.stuck:
            self.inner.abort_multipart_upload(path, upload_id)


class GoesDown(DelegatingStore):
    """After `healthy` calls of `op`, that call and every later call of any kind fail with
    `failure()`: a store that goes down half way (a StoreError), or the process interrupted
    there (KeyboardInterrupt). `made` counts the calls of `op` passed on to the store."""

    def __init__(self, inner: Store, op: str, healthy: int, failure: Callable[[], BaseException]) -> None:
        super().__init__(inner)
        self.op, self.healthy, self.failure = op, healthy, failure
        self.made = 0
        self.down = False
        self._lock = threading.Lock()

    def _delegate(self, op: str, where: object, mutating: bool, action: Callable[[], R]) -> R:
        with self._lock:
            if op == self.op and not self.down:
                self.down = self.made == self.healthy
                self.made += not self.down
            if self.down:
                raise self.failure()
        return action()


def store_down() -> InjectedFault:
    return InjectedFault("S3 request failed: ServiceUnavailable (HTTP 503)")


class RecordingProgress:
    """Every step a cleanup starts, with its total and how far it advanced."""

    def __init__(self) -> None:
        self.steps: list[list[object]] = []
        self._lock = threading.Lock()

    def start(self, description: str, total: int | None) -> None:
        with self._lock:
            self.steps.append([description, total, 0])

    def advance(self, amount: int = 1) -> None:
        with self._lock:
            self.steps[-1][2] += amount  # type: ignore[operator]

    def step(self, description: str) -> tuple[int | None, int]:
        """(total, advanced) of the last step so described."""
        matches = [(total, done) for name, total, done in self.steps if name == description]
        assert matches, f"no step {description!r} in {[s[0] for s in self.steps]}"
        return matches[-1]  # type: ignore[return-value]


# The CLI ------------------------------------------------------------------------------------------
class Terminal(io.StringIO):
    """A stdin someone is typing into."""

    def isatty(self) -> bool:
        return True


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`airflow-commit *argv` in-process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("airflow-commit") and "error:" in lines[0]
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


# The example DAG's one run (conftest.py's `example_dag_run`) -----------------------------------------
@dataclass
class ExampleDagRun:
    """The example DAG's run over three roots, and what lay outside them before it ran.

    `map_index[root]` is the map index of each root's cleanup tasks (roots are `lake/t1`,
    `lake/t2`, `out/dataset1`)."""

    run: Any
    store: S3Store
    bucket: str
    map_index: dict[str, int]
    outside: dict[str, set[str]]

    def path(self, key: str) -> StorePath:
        return StorePath("s3", self.bucket, key)
