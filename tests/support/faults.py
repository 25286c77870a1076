"""A store wrapper that fails one chosen store call, to test every phase against every fault.

Every call through the wrapper is numbered and logged, so a test can first run a scenario
cleanly to learn its calls, then re-run it with a fault at each of them. Fault modes:

- ``before``: the call is not made and raises `InjectedFault` (a `StoreError`): a request that
  never reached the store;
- ``after``: the call is made, then raises `InjectedFault`: a request that succeeded but whose
  response was lost (the hard case: the store changed, the caller thinks it did not);
- ``crash`` / ``crash_after``: like before/after, but raise `SimulatedCrash` (a BaseException)
  and mark the wrapper dead: every later call raises it too, so no clean-up handler of the
  "dead process" can touch the store until `revive()`;
- ``exit``: `os._exit()` before the call, for tests that run the victim in a child process.

Writes through `open_write` count twice: ``open_write`` when the stream is opened and
``write_close`` when closing it publishes the object.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store, StoreError
from airflow_commit_provider.core.store.streams import PublishOnCloseStream
from support.stores import DelegatingStore

R = TypeVar("R")
FaultMode = Literal["before", "after", "crash", "crash_after", "exit"]
EXIT_CODE = 86


class InjectedFault(StoreError):
    """A store call failed because the test said so."""


class SimulatedCrash(BaseException):
    """The process making store calls died (not an Exception: ordinary handlers do not catch it)."""


@dataclass(frozen=True)
class StoreCall:
    index: int
    op: str
    path: str
    mutating: bool

    def __str__(self) -> str:
        return f"#{self.index} {self.op}({self.path})"

    @property
    def shape(self) -> str:
        """The object the call concerns (a rename's target) with IDs and numbers left out: the same
        step on another file, task, attempt or partition has the same shape (a sweep that faults
        every kind of call, not every repetition of it, keys on `op` and this)."""
        target = re.sub(r"[0-9a-f]{32}", "<id>", self.path.split(" -> ")[-1])
        return re.sub(r"\d+", "#", target)


CallFilter = Callable[[StoreCall], bool]


class FaultInjectingStore(DelegatingStore):
    """Delegates to `inner`; injects at most one planned fault (or a crash) at a chosen call."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.calls: list[StoreCall] = []
        self.fired: StoreCall | None = None
        self.dead = False
        self.lost_uploads: list[tuple[StorePath, str]] = []
        """Multipart uploads whose creation succeeded but whose response was 'lost'."""
        self.on_call: Callable[[StoreCall], None] | None = None
        """Runs before each call is made: lets a test interleave other work at an exact point."""
        self._lock = threading.Lock()
        self._at: int | None = None
        self._when: CallFilter | None = None
        self._mode: FaultMode = "before"

    # Planning ----------------------------------------------------------------------------------
    def inject(
        self, *, at: int | None = None, when: CallFilter | None = None, mode: FaultMode = "before"
    ) -> None:
        """Fail the call numbered `at`, or the first call for which `when` is true, once."""
        if (at is None) == (when is None):
            raise ValueError("give exactly one of at= and when=")
        with self._lock:
            self._at, self._when, self._mode, self.fired = at, when, mode, None

    def disarm(self) -> None:
        with self._lock:
            self._at, self._when = None, None

    def revive(self) -> None:
        """A new process takes over: calls work again (an unfired plan stays armed)."""
        with self._lock:
            self.dead = False

    def calls_since(self, start: int) -> list[StoreCall]:
        with self._lock:
            return self.calls[start:]

    @property
    def call_count(self) -> int:
        with self._lock:
            return len(self.calls)

    # The one gate every call passes ---------------------------------------------------------------
    def _gate(self, op: str, path: object, mutating: bool) -> tuple[StoreCall, FaultMode | None]:
        with self._lock:
            call = StoreCall(len(self.calls), op, str(path), mutating)
            self.calls.append(call)
            if self.dead:
                raise SimulatedCrash(f"store call {call} after the process died")
            fire = self.fired is None and (
                (self._at is not None and call.index == self._at)
                or (self._when is not None and self._when(call))
            )
            mode = self._mode
            if fire:
                self.fired = call
                self._at, self._when = None, None
                if mode in ("crash", "crash_after"):
                    self.dead = True
            hook = self.on_call
        if not fire:
            if hook is not None:
                hook(call)
            return call, None
        if mode == "exit":
            os._exit(EXIT_CODE)
        if mode == "before":
            raise InjectedFault(f"injected fault before {call}")
        if mode == "crash":
            raise SimulatedCrash(f"process died before {call}")
        return call, mode

    @staticmethod
    def _after(call: StoreCall, mode: FaultMode | None) -> None:
        if mode == "after":
            raise InjectedFault(f"injected fault after {call} (the call took effect)")
        if mode == "crash_after":
            raise SimulatedCrash(f"process died after {call} (the call took effect)")

    def _delegate(self, op: str, where: object, mutating: bool, action: Callable[[], R]) -> R:
        call, mode = self._gate(op, where, mutating)
        result = action()
        self._after(call, mode)
        return result

    # Calls that need more than the gate ------------------------------------------------------------
    def open_write(self, path: StorePath) -> PublishOnCloseStream:
        call, mode = self._gate("open_write", path, True)
        stream = self.inner.open_write(path)
        if mode is not None:
            stream.discard()
        self._after(call, mode)
        return _FaultStream(self, path, stream)

    def create_multipart_upload(self, path: StorePath) -> str:
        call, mode = self._gate("create_multipart_upload", path, True)
        upload_id = self.inner.create_multipart_upload(path)
        if mode in ("after", "crash_after"):
            with self._lock:
                self.lost_uploads.append((path, upload_id))
        self._after(call, mode)
        return upload_id


class _FaultStream(PublishOnCloseStream):
    """Counts the close that publishes a written object as its own store call."""

    def __init__(self, store: FaultInjectingStore, path: StorePath, inner: PublishOnCloseStream):
        super().__init__(str(path))
        self._store = store
        self._path = path
        self._inner = inner

    def _write(self, data: bytes) -> int:
        return self._inner.write(data)

    def tell(self) -> int:
        return self._inner.tell()

    def _flush(self) -> None:
        self._inner.flush()

    def _publish(self) -> None:
        try:
            call, mode = self._store._gate("write_close", self._path, True)
        except InjectedFault:
            self._inner.discard()
            raise
        self._inner.close()
        self._store._after(call, mode)

    def _discard(self) -> None:
        self._inner.discard()
