"""The store doctor (``airflow-commit doctor``): every property the committers rely on, probed under
a scratch prefix of a destination, for a person choosing or debugging a store.

The doctor also reads the bucket's lifecycle configuration (`LIFECYCLE`) and names every rule
that would abort a job's incomplete uploads (`core.store.lifecycle` says which apply and how
soon); it fails when one is shorter than `max_job_duration`, the longest job that writes there,
and warns when that is not given. Job setup makes the same comparison with the job's own
timeout (`core.store.check.require_uploads_outlive_job`).

Run by the CLI, never by a job: job setup runs only the cheap sequential probe of conditional
create (`core.store.check.require_conditional_create`, three requests, once per endpoint and bucket
per process). The concurrent race stays here: a store that ignores ``If-None-Match: *`` fails the
sequential probe already, while a race can pass by luck on a store that enforces the header only
sequentially, so it is a diagnosis to repeat (``--rounds``), not a gate worth eight more requests
and threads in every process. Every check runs over the narrow `Store` interface, under the gate's
scratch prefix (`core.store.check.scratch_prefix`, swept of keys and uploads afterwards).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

from airflow_commit_provider.core.options import S3_MIN_PART_SIZE
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    LifecycleNotReadableError,
    Store,
    StoreError,
)
from airflow_commit_provider.core.store.check import (
    CONDITIONAL_CREATE,
    ENFORCED,
    PropertyCheck,
    Scratch,
    check_conditional_create,
    one_line,
    refusal,
    scratch_prefix,
    store_label,
)
from airflow_commit_provider.core.store.lifecycle import (
    UploadAbortRule,
    earliest_abort,
    lifecycle_hours,
    outlived_by,
    rules_for_destination,
    upload_abort_rules,
)

__all__ = ["COMMIT_PROPERTIES", "PROPERTIES", "StoreReport", "check_store"]

ENDPOINT = "endpoint"
CONCURRENT_CREATE = "concurrent-create"
MULTIPART = "multipart"
PART_SIZE = "part-size"
LIST_AFTER_WRITE = "list-after-write"
LIFECYCLE = "lifecycle"
PROPERTIES = (
    ENDPOINT,
    CONDITIONAL_CREATE,
    CONCURRENT_CREATE,
    MULTIPART,
    PART_SIZE,
    LIST_AFTER_WRITE,
    LIFECYCLE,
)
#: The properties a committer refuses a store over.
COMMIT_PROPERTIES = (CONDITIONAL_CREATE, CONCURRENT_CREATE)


@dataclass(frozen=True)
class StoreReport:
    store: str
    """Where the store is (endpoint and bucket), as messages name it."""
    scratch: StorePath
    checks: tuple[PropertyCheck, ...]
    requests: int
    """Store requests the checks and their clean-up made."""
    note: str | None = None
    lifecycle_rules: tuple[UploadAbortRule, ...] = ()
    """The bucket's lifecycle rules that abort incomplete uploads under the destination, shortest first."""

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def check_store(
    store: Store,
    destination: StorePath,
    *,
    writers: int = 8,
    rounds: int = 3,
    max_job_duration: float | None = None,
    now: datetime | None = None,
) -> StoreReport:
    """Check every property in `PROPERTIES` under a scratch prefix of `destination`; see the module doc.

    `max_job_duration`: the longest job that writes to `destination`, in seconds (None: unknown),
    against the bucket's lifecycle rules; `now` is when a job started now would begin (the default:
    the clock), for the earliest abort the report shows.
    """
    if max_job_duration is not None and not max_job_duration > 0:
        raise ValueError(f"max_job_duration must be positive, got {max_job_duration!r}")
    if writers < 2 or rounds < 1:
        raise ValueError(f"need at least 2 racing writers and 1 round, got {writers} and {rounds}")
    mark = store.statistics.snapshot()
    checks: list[PropertyCheck] = []
    with scratch_prefix(store, destination, sweep=True) as scratch:
        steps: list[tuple[str, Callable[[], PropertyCheck]]] = [
            (ENDPOINT, lambda: _endpoint(store, scratch)),
            (CONDITIONAL_CREATE, lambda: check_conditional_create(store, scratch, read_back=True)),
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
                checks.append(PropertyCheck(name, False, one_line(str(error))))
    rules: tuple[UploadAbortRule, ...] = ()
    if checks[0].passed:
        try:
            lifecycle, rules = _lifecycle(
                store, destination, max_job_duration, now or datetime.now(timezone.utc)
            )
        except StoreError as error:
            lifecycle = PropertyCheck(LIFECYCLE, False, one_line(str(error)))
    else:
        lifecycle = PropertyCheck(LIFECYCLE, False, "not checked: the endpoint is not usable")
    checks.append(lifecycle)
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
    return StoreReport(store_label(store, destination), scratch.root, tuple(checks), requests, note, rules)


def _endpoint(store: Store, scratch: Scratch) -> PropertyCheck:
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


def _concurrent_create(store: Store, scratch: Scratch, writers: int, rounds: int) -> PropertyCheck:
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


def _multipart(store: Store, scratch: Scratch) -> PropertyCheck:
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


def _part_size(store: Store, scratch: Scratch) -> PropertyCheck:
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
        small_refused = refusal(error)
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
            f"a non-final part of exactly 5 MiB was refused at complete ({refusal(error)}); S3 accepts it "
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


def _list_after_write(store: Store, scratch: Scratch) -> PropertyCheck:
    directory = scratch.root.join("listing")
    path = scratch.path("listing", "new-key")
    store.write_bytes(path, b"listed")
    if "new-key" not in _names(store, directory):
        return PropertyCheck(LIST_AFTER_WRITE, False, "a key just written was not listed")
    store.delete(path)
    if "new-key" in _names(store, directory):
        return PropertyCheck(LIST_AFTER_WRITE, False, "a key just deleted was still listed")
    return PropertyCheck(LIST_AFTER_WRITE, True, "a new key was listed at once, and unlisted once deleted")


def _lifecycle(
    store: Store, directory: StorePath, max_job_duration: float | None, now: datetime
) -> tuple[PropertyCheck, tuple[UploadAbortRule, ...]]:
    """The lifecycle rules that abort uploads under `directory`, against the longest job."""
    try:
        configured = store.lifecycle_rules(directory)
    except LifecycleNotReadableError as error:
        return PropertyCheck(LIFECYCLE, True, f"not checked: {error}", warning=True), ()
    try:
        rules = tuple(rules_for_destination(upload_abort_rules(configured), directory))
    except ValueError as error:
        return PropertyCheck(LIFECYCLE, False, f"bucket {directory.bucket}: {error}"), ()
    if not rules:
        return (
            PropertyCheck(
                LIFECYCLE, True, "no enabled lifecycle rule aborts incomplete uploads under the destination"
            ),
            rules,
        )
    shortest = rules[0]
    named = "; ".join(rule.describe() for rule in rules)
    kept = f"uploads a job starts now are kept until at least {earliest_abort(now, shortest.days):%Y-%m-%d %H:%M} UTC"
    if max_job_duration is None:
        return (
            PropertyCheck(
                LIFECYCLE,
                True,
                f"{named}; the longest job is unknown (give --max-job-duration, the longest execution_timeout "
                f"of the tasks writing here): a job must end within {lifecycle_hours(shortest.shortest_life)} "
                f"or lose its pending uploads ({kept})",
                warning=True,
            ),
            rules,
        )
    job = lifecycle_hours(max_job_duration)
    short = outlived_by(rules, max_job_duration)
    if short:
        names = ", ".join(repr(rule.rule_id) for rule in short)
        return (
            PropertyCheck(
                LIFECYCLE,
                False,
                f"{named}; a job of {job} (the longest) outlives {names}: the upload committers would lose "
                "its pending uploads before job commit, and job setup refuses such a job",
            ),
            rules,
        )
    return PropertyCheck(
        LIFECYCLE, True, f"{named}; a job of {job} (the longest) ends before any of them"
    ), rules


def _upload_ids(store: Store, scratch: Scratch) -> set[str]:
    return {upload.upload_id for upload in store.list_multipart_uploads(scratch.root)}


def _names(store: Store, directory: StorePath) -> set[str]:
    return {status.path.relative_to(directory) for status in store.list_files(directory)}
