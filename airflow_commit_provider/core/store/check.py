"""Know the store before trusting it: the gate every job's setup passes.

The commit point (the job's outcome file) and exclusive task commit are created if absent
(``If-None-Match: *`` on S3). Some S3-compatible stores ignore that header, or did not enforce it
under concurrent PUTs (SeaweedFS 4.16, its issue 8800); Hadoop's third-party-store notes call
commit protocols built on conditional create unsafe there (``fs.s3a.create.conditional.enabled``,
HADOOP-19256). A store that silently lets a second create win would let a commit and an abort both
"win", or two attempts of one task both commit.

`require_conditional_create` (job setup, in the driver) runs the cheap sequential probe (three
requests), once per endpoint and bucket per process, and refuses a store that fails it before any
work. The interactive check of every property, with the concurrent race, is the doctor
(`airflow_commit_provider.store_doctor`, ``airflow-commit doctor``), which the driver never runs;
it shares this module's scratch prefix and conditional-create check. A probe works under a unique
scratch prefix inside the destination it is given (``_airflow_commit_store_check-<id>/``, hidden
from Spark's readers) and removes everything it created there, uploads included, even when a check
fails; it never touches anything else.

`require_uploads_outlive_job` (job setup of the upload committers) reads the bucket's lifecycle
rules once per job and refuses a job that could outlive one of them (`lifecycle` says which rules
apply and how soon); the doctor reports the same rules (docs/lifecycle-rules.md).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    LifecycleNotReadableError,
    Store,
    StoreError,
    UnsupportedStoreError,
)
from airflow_commit_provider.core.store.lifecycle import (
    UploadAbortRule,
    lifecycle_hours,
    outlived_by,
    rules_for_destination,
    upload_abort_rules,
)

log = logging.getLogger(__name__)

#: How a user states trust in a store's conditional create without the probe (``trusted``).
CONDITIONAL_CREATE_ENV = "AIRFLOW_COMMIT_S3_CONDITIONAL_CREATE"
#: ``check``: probe once per process before a job relies on it; ``trusted``: the user vouches.
CONDITIONAL_CREATE_MODES = ("check", "trusted")
#: What a store whose own semantics guarantee create-if-absent says (link(2) on a local disk).
ENFORCED = "enforced"
SCRATCH_PREFIX = "_airflow_commit_store_check-"

#: The property the gate probes (the doctor's name for it too).
CONDITIONAL_CREATE = "conditional-create"

_S3_ERROR = re.compile(r"failed: (\w+) \(HTTP (\d+)\)")


class UntrustedStoreError(UnsupportedStoreError):
    """The store failed a property a committer relies on."""


@dataclass(frozen=True)
class PropertyCheck:
    name: str
    passed: bool
    reason: str
    """One line, never a credential."""
    warning: bool = False
    """Passed, but with something a person should know (a property that could not be checked)."""


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


def store_label(store: Store, destination: StorePath) -> str:
    """The store as messages and the per-process cache name it: endpoint and bucket."""
    label = store.endpoint_label()
    return f"{label}, bucket {destination.bucket}" if destination.bucket else label


# The gate for committers ----------------------------------------------------------------------
_verdicts: dict[str, PropertyCheck] = {}
_verdicts_lock = threading.Lock()


def require_conditional_create(store: Store, destination: StorePath, purpose: str) -> None:
    """Refuse `purpose` unless the store enforces create-if-absent; probe at most once per process.

    The answer is cached per endpoint and bucket (buckets of one endpoint can differ: policies,
    S3 Express directory buckets). A probe that cannot get an answer (the store unreachable)
    raises its StoreError and caches nothing.
    """
    store.require("atomic_create_if_absent", purpose)
    mode = store.conditional_create
    if mode == ENFORCED:
        return
    label = store_label(store, destination)
    if mode == "trusted":
        log.info("%s: conditional create trusted without a probe (conditional_create=trusted)", label)
        return
    with _verdicts_lock:
        verdict = _verdicts.get(label)
        if verdict is None:
            verdict = _verdicts[label] = probe_conditional_create(store, destination)
    if not verdict.passed:
        raise UntrustedStoreError(
            f"{purpose} relies on conditional create (If-None-Match: *), but the store at {label} fails "
            f"{verdict.name}: {verdict.reason}; run `airflow-commit doctor {destination.uri()}`, and only if "
            f"you know the store enforces it set {CONDITIONAL_CREATE_ENV}=trusted (the store's "
            "conditional_create setting)"
        )


def probe_conditional_create(store: Store, destination: StorePath) -> PropertyCheck:
    """The sequential probe: create a new key, create it again (must be refused), delete it."""
    label = store_label(store, destination)
    with scratch_prefix(store, destination, sweep=False) as scratch:
        try:
            verdict = check_conditional_create(store, scratch, read_back=False)
        except StoreError as error:
            raise StoreError(f"cannot check conditional create on {label}: {error}") from error
    log.info("%s: conditional create %s (%s)", label, "holds" if verdict.passed else "FAILS", verdict.reason)
    return verdict


# The gate for upload committers: the bucket's lifecycle rules -----------------------------------
_lifecycle_unreadable: set[str] = set()


class UploadsOutlivedError(UnsupportedStoreError):
    """A lifecycle rule could abort the job's pending uploads before the job can end."""


def require_uploads_outlive_job(
    store: Store, destination: StorePath, max_job_duration: float | None, purpose: str
) -> list[UploadAbortRule]:
    """Refuse `purpose` if a lifecycle rule of the bucket could abort its pending uploads before a
    job of `max_job_duration` seconds ends (`lifecycle` says which rules apply, and how soon).

    One GetBucketLifecycleConfiguration per call (once per job: the rules can change between
    jobs). Without a known duration nothing is refused: the shortest rule is logged as the bound
    the job must stay under. Without s3:GetLifecycleConfiguration the check is skipped, said once
    per endpoint and bucket per process. Returns the rules that apply, shortest first.
    """
    label = store_label(store, destination)
    try:
        configured = store.lifecycle_rules(destination)
    except LifecycleNotReadableError as error:
        with _verdicts_lock:
            first = label not in _lifecycle_unreadable
            _lifecycle_unreadable.add(label)
        if first:
            log.warning("%s; not checked whether its lifecycle rules abort uploads of %s", error, purpose)
        return []
    try:
        rules = rules_for_destination(upload_abort_rules(configured), destination)
    except ValueError as error:
        raise StoreError(f"bucket {destination.bucket} at {label}: {error}") from None
    if not rules:
        return rules
    shortest = rules[0]
    if max_job_duration is None:
        log.warning(
            "%s: %s; the job's longest duration is unknown (no execution_timeout or max_job_duration), "
            "so it must end within %s or lose its pending uploads",
            destination.uri(),
            shortest.describe(),
            lifecycle_hours(shortest.shortest_life),
        )
    elif outlived_by(rules, max_job_duration):
        raise UploadsOutlivedError(
            f"{purpose} cannot write to {destination.uri()}: {shortest.describe()}, and the job may run "
            f"{lifecycle_hours(max_job_duration)} (its timeout); shorten the job's timeout or lengthen "
            f"DaysAfterInitiation of rule {shortest.rule_id!r}"
        )
    return rules


@dataclass
class Scratch:
    """A probe's scratch prefix and what was made under it, for `scratch_prefix` to remove."""

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
def scratch_prefix(store: Store, destination: StorePath, *, sweep: bool) -> Iterator[Scratch]:
    """A unique prefix under `destination`, emptied on the way out whatever happened.

    With `sweep`, also every upload listed and every key found under it (an upload whose
    initiation answer was lost is still found); without, just the keys and uploads made (one
    DeleteObjects for the probe's one key).
    """
    scratch = Scratch(destination.join(f"{SCRATCH_PREFIX}{uuid.uuid4().hex[:16]}"))
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


def check_conditional_create(store: Store, scratch: Scratch, *, read_back: bool) -> PropertyCheck:
    """Create a new key, then create it again: the second must be refused. With `read_back`, the
    key must also still hold the first create's bytes (the doctor's check: a store could refuse
    and replace)."""
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
            CONDITIONAL_CREATE, True, f"a second create of an existing key was refused ({refusal(refused)})"
        )
    return PropertyCheck(
        CONDITIONAL_CREATE,
        False,
        "a create with If-None-Match: * of an existing key succeeded and replaced it: the store ignores the header",
    )


def refusal(error: BaseException) -> str:
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
    return one_line(text)


def one_line(text: str) -> str:
    """A store's message as one line of a verdict."""
    return " ".join(text.split())
