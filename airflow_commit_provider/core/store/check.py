"""Know the store before trusting it: probe the properties the committers rely on.

The commit point (the job's outcome file) and exclusive task commit are created if absent
(``If-None-Match: *`` on S3). Some S3-compatible stores ignore that header, or did not enforce it
under concurrent PUTs (SeaweedFS 4.16, its issue 8800); Hadoop's third-party-store notes call
commit protocols built on conditional create unsafe there (``fs.s3a.create.conditional.enabled``,
HADOOP-19256). A store that silently lets a second create win would let a commit and an abort both
"win", or two attempts of one task both commit.

Two entry points, both over the narrow `Store` interface only:

- `check_store` (``airflow-commit doctor``): every property, with the concurrent race, for a person
  choosing or debugging a store;
- `require_conditional_create` (job setup): the cheap sequential probe (three requests), once per
  endpoint and bucket per process, refusing a store that fails it before any work.

The race stays in the doctor: a store that ignores the header fails the sequential probe already,
while a race can pass by luck on a store that enforces the header only sequentially, so it is a
diagnosis to repeat (``--rounds``), not a gate worth eight more requests and threads in every
process. Every probe works under a unique scratch prefix inside the directory it is given
(``_airflow_commit_store_check-<id>/``, hidden from Spark's readers) and removes everything it
created there, uploads included, even when a check fails; it never touches anything else.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from airflow_commit_provider.core.options import S3_MIN_PART_SIZE
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    Store,
    StoreError,
    UnsupportedStoreError,
)

log = logging.getLogger(__name__)

#: How a user states trust in a store's conditional create without the probe (``trusted``).
CONDITIONAL_CREATE_ENV = "AIRFLOW_COMMIT_S3_CONDITIONAL_CREATE"
#: ``check``: probe once per process before a job relies on it; ``trusted``: the user vouches.
CONDITIONAL_CREATE_MODES = ("check", "trusted")
#: What a store whose own semantics guarantee create-if-absent says (link(2) on a local disk).
ENFORCED = "enforced"
SCRATCH_PREFIX = "_airflow_commit_store_check-"

ENDPOINT = "endpoint"
CONDITIONAL_CREATE = "conditional-create"
CONCURRENT_CREATE = "concurrent-create"
MULTIPART = "multipart"
PART_SIZE = "part-size"
LIST_AFTER_WRITE = "list-after-write"
PROPERTIES = (ENDPOINT, CONDITIONAL_CREATE, CONCURRENT_CREATE, MULTIPART, PART_SIZE, LIST_AFTER_WRITE)
#: The properties a committer refuses a store over.
COMMIT_PROPERTIES = (CONDITIONAL_CREATE, CONCURRENT_CREATE)

_S3_ERROR = re.compile(r"failed: (\w+) \(HTTP (\d+)\)")


class UntrustedStoreError(UnsupportedStoreError):
    """The store failed a property a committer relies on."""


@dataclass(frozen=True)
class PropertyCheck:
    name: str
    passed: bool
    reason: str
    """One line, never a credential."""


@dataclass(frozen=True)
class StoreReport:
    store: str
    """Where the store is (endpoint and bucket), as messages name it."""
    scratch: StorePath
    checks: tuple[PropertyCheck, ...]
    requests: int
    """Store requests the checks and their clean-up made."""
    note: str | None = None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def chosen_conditional_create(requested: str | None, environ: Mapping[str, str] | None = None) -> str:
    """`requested`, else `CONDITIONAL_CREATE_ENV`, else ``check``; anything else is an error."""
    environ = os.environ if environ is None else environ
    where = "conditional_create"
    if not requested:
        requested, where = environ.get(CONDITIONAL_CREATE_ENV) or "check", CONDITIONAL_CREATE_ENV
    choice = requested.strip().lower()
    if choice not in CONDITIONAL_CREATE_MODES:
        raise StoreError(f"{where}={requested!r}: must be one of {', '.join(CONDITIONAL_CREATE_MODES)}")
    return choice


def store_label(store: Store, directory: StorePath) -> str:
    """The store as messages and the per-process cache name it: endpoint and bucket."""
    label = store.endpoint_label()
    return f"{label}, bucket {directory.bucket}" if directory.bucket else label


# The gate for committers ----------------------------------------------------------------------
_verdicts: dict[str, PropertyCheck] = {}
_verdicts_lock = threading.Lock()


def require_conditional_create(store: Store, directory: StorePath, purpose: str) -> None:
    """Refuse `purpose` unless the store enforces create-if-absent; probe at most once per process.

    The answer is cached per endpoint and bucket (buckets of one endpoint can differ: policies,
    S3 Express directory buckets). A probe that cannot get an answer (the store unreachable)
    raises its StoreError and caches nothing.
    """
    store.require("atomic_create_if_absent", purpose)
    mode = store.conditional_create
    if mode == ENFORCED:
        return
    label = store_label(store, directory)
    if mode == "trusted":
        log.info("%s: conditional create trusted without a probe (conditional_create=trusted)", label)
        return
    with _verdicts_lock:
        verdict = _verdicts.get(label)
        if verdict is None:
            verdict = _verdicts[label] = probe_conditional_create(store, directory)
    if not verdict.passed:
        raise UntrustedStoreError(
            f"{purpose} relies on conditional create (If-None-Match: *), but the store at {label} fails "
            f"{verdict.name}: {verdict.reason}; run `airflow-commit doctor {directory.uri()}`, and only if "
            f"you know the store enforces it set {CONDITIONAL_CREATE_ENV}=trusted (the store's "
            "conditional_create setting)"
        )


def probe_conditional_create(store: Store, directory: StorePath) -> PropertyCheck:
    """The sequential probe: create a new key, create it again (must be refused), delete it."""
    label = store_label(store, directory)
    with _scratch(store, directory, sweep=False) as scratch:
        try:
            verdict = _conditional_create(store, scratch, read_back=False)
        except StoreError as error:
            raise StoreError(f"cannot check conditional create on {label}: {error}") from error
    log.info("%s: conditional create %s (%s)", label, "holds" if verdict.passed else "FAILS", verdict.reason)
    return verdict


# The doctor -------------------------------------------------------------------------------------
def check_store(store: Store, directory: StorePath, *, writers: int = 8, rounds: int = 3) -> StoreReport:
    """Check every property in `PROPERTIES` under a scratch prefix of `directory`; see the module doc."""
    if writers < 2 or rounds < 1:
        raise ValueError(f"need at least 2 racing writers and 1 round, got {writers} and {rounds}")
    mark = store.statistics.snapshot()
    checks: list[PropertyCheck] = []
    with _scratch(store, directory, sweep=True) as scratch:
        steps: list[tuple[str, Callable[[], PropertyCheck]]] = [
            (ENDPOINT, lambda: _endpoint(store, scratch)),
            (CONDITIONAL_CREATE, lambda: _conditional_create(store, scratch, read_back=True)),
            (CONCURRENT_CREATE, lambda: _concurrent_create(store, scratch, writers, rounds)),
            (MULTIPART, lambda: _multipart(store, scratch)),
            (PART_SIZE, lambda: _part_size(store, scratch)),
            (LIST_AFTER_WRITE, lambda: _list_after_write(store, scratch)),
        ]
        for name, step in steps:
            if checks and not checks[0].passed:
                checks.append(PropertyCheck(name, False, "not checked: the endpoint is not usable"))
                continue
            try:
                checks.append(step())
            except StoreError as error:
                checks.append(PropertyCheck(name, False, _one_line(str(error))))
    requests = sum(
        value
        for name, value in store.statistics.counters_since(mark).counters.items()
        if name.startswith("op_")
    )
    note = None
    if store.conditional_create == ENFORCED:
        note = (
            "local filesystem: create-if-absent is link(2), which the kernel refuses on an existing name "
            "(as O_EXCL); it holds wherever O_EXCL does (not on some network filesystems)"
        )
    return StoreReport(store_label(store, directory), scratch.root, tuple(checks), requests, note)


@dataclass
class _Scratch:
    root: StorePath
    keys: list[StorePath] = field(default_factory=list)
    uploads: list[tuple[StorePath, str]] = field(default_factory=list)

    def path(self, *name: str) -> StorePath:
        path = self.root.join(*name)
        self.keys.append(path)
        return path

    def upload(self, store: Store, path: StorePath) -> str:
        upload_id = store.create_multipart_upload(path)
        self.uploads.append((path, upload_id))
        return upload_id


@contextmanager
def _scratch(store: Store, directory: StorePath, *, sweep: bool) -> Iterator[_Scratch]:
    """A unique prefix under `directory`, emptied on the way out whatever happened.

    With `sweep`, also every upload listed and every key found under it (an upload whose
    initiation answer was lost is still found); without, just the keys and uploads made (one
    DeleteObjects for the probe's one key).
    """
    scratch = _Scratch(directory.join(f"{SCRATCH_PREFIX}{uuid.uuid4().hex[:16]}"))
    try:
        yield scratch
    finally:
        try:
            for path, upload_id in scratch.uploads:
                with suppress(StoreError):
                    store.abort_multipart_upload(path, upload_id)
            if sweep:
                if store.capabilities.multipart_upload:
                    for upload in list(store.list_multipart_uploads(scratch.root)):
                        with suppress(StoreError):
                            store.abort_multipart_upload(upload.path, upload.upload_id)
                store.delete_tree(scratch.root)
            elif scratch.keys:
                store.delete_files(scratch.keys)
        except StoreError as error:
            log.warning(
                "could not remove the store check's scratch objects under %s: %s", scratch.root, error
            )


def _endpoint(store: Store, scratch: _Scratch) -> PropertyCheck:
    # A listing first: some stores (SeaweedFS) create a missing bucket on the first PUT into it.
    list(store.list_files(scratch.root))
    path = scratch.path("endpoint")
    data = b"airflow-commit store check"
    store.write_bytes(path, data)
    if store.read_bytes(path) != data:
        return PropertyCheck(ENDPOINT, False, "a key read back differs from what was written")
    store.delete(path)
    if store.get_status(path) is not None:
        return PropertyCheck(ENDPOINT, False, "a deleted key is still there")
    return PropertyCheck(
        ENDPOINT, True, "reachable, destination listed; wrote, read back and deleted a key (credentials work)"
    )


def _conditional_create(store: Store, scratch: _Scratch, *, read_back: bool) -> PropertyCheck:
    path = scratch.path("conditional-create")
    first = b"first create"
    try:
        store.write_bytes(path, first, if_absent=True)
    except FileAlreadyExistsError as error:
        return PropertyCheck(CONDITIONAL_CREATE, False, f"a create of a new key was refused: {error}")
    try:
        store.write_bytes(path, b"second create", if_absent=True)
    except FileAlreadyExistsError as refused:
        if read_back and store.read_bytes(path) != first:
            return PropertyCheck(
                CONDITIONAL_CREATE, False, "the second create was refused, yet it replaced the object"
            )
        return PropertyCheck(
            CONDITIONAL_CREATE, True, f"a second create of an existing key was refused ({_refusal(refused)})"
        )
    return PropertyCheck(
        CONDITIONAL_CREATE,
        False,
        "a create with If-None-Match: * of an existing key succeeded and replaced it: the store ignores the header",
    )


def _concurrent_create(store: Store, scratch: _Scratch, writers: int, rounds: int) -> PropertyCheck:
    for round_number in range(1, rounds + 1):
        path = scratch.path(f"race-{round_number}")
        payloads = [f"writer {writer} of round {round_number}".encode() for writer in range(writers)]
        winners = _race(store, path, payloads)
        if len(winners) != 1:
            return PropertyCheck(
                CONCURRENT_CREATE,
                False,
                f"round {round_number}: {len(winners)} of {writers} concurrent creates of one new key "
                "succeeded (exactly one must)",
            )
        if store.read_bytes(path) != payloads[winners[0]]:
            return PropertyCheck(
                CONCURRENT_CREATE,
                False,
                f"round {round_number}: the key holds a loser's bytes, not the winner's",
            )
    return PropertyCheck(
        CONCURRENT_CREATE,
        True,
        f"{rounds} round{'s' if rounds > 1 else ''} of {writers} concurrent creates of one new key: "
        "exactly one winner each time, its bytes kept",
    )


def _race(store: Store, path: StorePath, payloads: list[bytes]) -> list[int]:
    """Create `path` from one thread per payload, all released at once; the winners' indexes."""
    start = threading.Barrier(len(payloads))

    def create(writer: int) -> bool:
        start.wait(timeout=60)
        try:
            store.write_bytes(path, payloads[writer], if_absent=True)
        except FileAlreadyExistsError:
            return False
        return True

    with ThreadPoolExecutor(len(payloads), thread_name_prefix="store-check-race") as pool:
        won = list(pool.map(create, range(len(payloads))))
    return [writer for writer, wins in enumerate(won) if wins]


def _multipart(store: Store, scratch: _Scratch) -> PropertyCheck:
    path = scratch.path("multipart")
    upload_id = scratch.upload(store, path)
    store.upload_part(path, upload_id, 1, b"pending part")
    if upload_id not in _upload_ids(store, scratch):
        return PropertyCheck(MULTIPART, False, "a new upload was not listed under its prefix")
    if any(status.path.relative_to(scratch.root) == "multipart" for status in store.list_files(scratch.root)):
        return PropertyCheck(
            MULTIPART, False, "a pending upload is visible as an object before it is completed"
        )
    store.abort_multipart_upload(path, upload_id)
    if upload_id in _upload_ids(store, scratch):
        return PropertyCheck(MULTIPART, False, "an aborted upload is still listed")
    return PropertyCheck(
        MULTIPART, True, "initiated, listed under its prefix, invisible until completed; abort removed it"
    )


def _part_size(store: Store, scratch: _Scratch) -> PropertyCheck:
    small = scratch.path("part-size-small")
    upload_id = scratch.upload(store, small)
    etags = [
        store.upload_part(small, upload_id, 1, b"s" * 1024),
        store.upload_part(small, upload_id, 2, b"t"),
    ]
    try:
        store.complete_multipart_upload(small, upload_id, etags)
        small_refused = None
    except StoreError as error:
        small_refused = _refusal(error)
    minimum = scratch.path("part-size-minimum")
    upload_id = scratch.upload(store, minimum)
    etags = [
        store.upload_part(minimum, upload_id, 1, bytes(S3_MIN_PART_SIZE)),
        store.upload_part(minimum, upload_id, 2, b"m"),
    ]
    try:
        store.complete_multipart_upload(minimum, upload_id, etags)
    except StoreError as error:
        return PropertyCheck(
            PART_SIZE,
            False,
            f"a non-final part of exactly 5 MiB was refused at complete ({_refusal(error)}); S3 accepts it "
            "and the committers' parts are that small at least",
        )
    if small_refused:
        return PropertyCheck(
            PART_SIZE,
            True,
            f"a 1 KiB non-final part was refused at complete ({small_refused}), 5 MiB accepted: as S3",
        )
    return PropertyCheck(
        PART_SIZE,
        True,
        "a 1 KiB non-final part was accepted (S3 refuses it: EntityTooSmall), 5 MiB too: more lenient than S3, "
        "harmless here (committers send parts of at least 5 MiB)",
    )


def _list_after_write(store: Store, scratch: _Scratch) -> PropertyCheck:
    directory = scratch.root.join("listing")
    path = scratch.path("listing", "new-key")
    store.write_bytes(path, b"listed")
    if "new-key" not in _names(store, directory):
        return PropertyCheck(LIST_AFTER_WRITE, False, "a key just written was not listed")
    store.delete(path)
    if "new-key" in _names(store, directory):
        return PropertyCheck(LIST_AFTER_WRITE, False, "a key just deleted was still listed")
    return PropertyCheck(LIST_AFTER_WRITE, True, "a new key was listed at once, and unlisted once deleted")


def _upload_ids(store: Store, scratch: _Scratch) -> set[str]:
    return {upload.upload_id for upload in store.list_multipart_uploads(scratch.root)}


def _names(store: Store, directory: StorePath) -> set[str]:
    return {status.path.relative_to(directory) for status in store.list_files(directory)}


def _refusal(error: BaseException) -> str:
    """How the store said no: S3's code and status, EEXIST locally, else the error itself."""
    if isinstance(error.__cause__, FileExistsError):
        return "EEXIST"
    text = str(error)
    found = _S3_ERROR.search(text) or _S3_ERROR.search(str(error.__cause__ or ""))
    if found:
        return f"{found.group(2)} {found.group(1)}"
    for code, status in (("PreconditionFailed", 412), ("ConditionalRequestConflict", 409)):
        if code in text:
            return f"{status} {code}"
    return _one_line(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())
