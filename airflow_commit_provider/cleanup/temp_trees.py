"""Finding and deleting stale temporary trees that failed or killed jobs leave in table roots.

Trees are `_temporary/<job>` and `__magic/<job>` (one tree per job, so one live job does not
shield or endanger another), `__magic_job-*` and `.spark-staging-*`. A tree is stale when its
newest write (file or pending upload) is older than the threshold. Just before deleting, the
tree is listed again: if anything changed since the first listing, a job is still writing to
it and it is left alone. Nothing outside these trees is ever deleted.

The tree of a job past its commit point but not yet committed (COMMITTING) is never deleted,
however old: it holds the manifests that rolling the job forward needs (see `committing`). Nor,
unless `job_id` names the job, is the tree of a live job (set up, undecided, younger than its own
timeout or `max_job_duration`: `committing.live_jobs`), however long since its last write: a task
can run longer than the threshold without writing to its job's tree, and the job still needs its
marker and upload records.
Nor is `_airflow_commit/`, the records directory, ever a temporary tree.

Memory does not grow with files: a tree is summed up as it is listed (counts, bytes, newest
write and an order-free digest of its files and uploads, which the second listing must match),
and the listing of trees is spooled on local disk. Only the summaries of the trees in the
container being listed are in memory at once (one per job). The files deleted are those the
second listing checked (their keys spooled on local disk), `DELETE_CHUNK` at a time, so an
interrupted run leaves a tree partly deleted but never shields it: what is left is as old as
before, and the next run deletes it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

from airflow_commit_provider.cleanup.committing import committing_jobs, live_jobs
from airflow_commit_provider.cleanup.common import Breaker, iso, one_line
from airflow_commit_provider.cleanup.reports import FAILED, NOT_TRIED, CleanupReport, ScopedListing
from airflow_commit_provider.cleanup.spool import Spool, batches
from airflow_commit_provider.cleanup.uploads import ABORTED, VANISHED, UploadInfo, abort_and_verify
from airflow_commit_provider.core.layout import MAGIC_PREFIX, TEMPORARY_DIR
from airflow_commit_provider.core.parallel import parallel_map, run_parallel
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus, PendingUpload, Store, StoreError
from airflow_commit_provider.durations import DEFAULT_MAX_JOB_DURATION, DEFAULT_OLDER_THAN, as_timedelta
from airflow_commit_provider.progress import NoProgress, Progress, format_size

MAGIC_DIR = "__magic"
SPARK_STAGING_PREFIX = ".spark-staging-"
#: Directories holding one subdirectory per job; each subdirectory is a tree of its own.
CONTAINERS = {TEMPORARY_DIR: "temporary", MAGIC_DIR: "magic"}
#: Files handed to one `Store.delete_files` call: one DeleteObjects request on S3 (its limit).
DELETE_CHUNK = 1000

DELETED, WOULD_DELETE, ACTIVE, GONE = "deleted", "would-delete", "active", "vanished"
#: The progress step of a tree delete: each file is listed once more (the check that no job wrote
#: to the tree meanwhile), then deleted; two steps a file.
CHECK_AND_DELETE = "Checking and deleting temporary files"


def tree_kind(name: str) -> str | None:
    """The kind of temporary tree a directory name starts, or None for ordinary directories."""
    if name in CONTAINERS:
        return CONTAINERS[name]
    if name.startswith(MAGIC_PREFIX):
        return "magic-job"
    if name.startswith(SPARK_STAGING_PREFIX):
        return "spark-staging"
    return None


@dataclass
class _Contents:
    """What a listing of a tree found, summed up as it streams by: never its files."""

    files: int = 0
    bytes: int = 0
    uploads: int = 0
    newest: float | None = None
    digest: int = 0
    """The sum of each file's and upload's 64-bit digest: the same whatever the listing order."""

    def add_file(self, status: FileStatus) -> None:
        self.files += 1
        self.bytes += status.size
        self._add(f"{status.path.key}\0{status.size}\0{status.modified!r}", status.modified)

    def add_upload(self, upload: PendingUpload) -> None:
        self.uploads += 1
        self._add(f"upload\0{upload.upload_id}\0{upload.initiated!r}", upload.initiated)

    def _add(self, identity: str, when: float) -> None:
        digest = hashlib.blake2b(identity.encode("utf-8", "surrogateescape"), digest_size=8).digest()
        self.digest = (self.digest + int.from_bytes(digest, "big")) % (1 << 64)
        self.newest = when if self.newest is None else max(self.newest, when)

    @property
    def fingerprint(self) -> tuple[int, int, int, int]:
        return (self.files, self.bytes, self.uploads, self.digest)


@dataclass(frozen=True)
class TempTree:
    path: StorePath
    kind: str
    job_id: str | None
    files: int
    bytes: int
    uploads: int
    """Pending multipart uploads inside the tree (aborted with it)."""
    newest: float | None
    """Newest write in the tree (file or upload), epoch seconds."""
    age_seconds: float | None
    stale: bool
    loose: bool = False
    """Files directly inside a container (`_temporary/x`): only those files are deleted."""
    committing: bool = False
    """The tree's job is past its commit point: kept for rolling it forward, however old."""
    live: bool = False
    """The tree's job is live (`committing.live_jobs`): kept, however old its newest write."""
    fingerprint: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Files, bytes, uploads and their digest when listed (`_Contents.fingerprint`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "kind": self.kind,
            "job_id": self.job_id,
            "files": self.files,
            "bytes": self.bytes,
            "uploads": self.uploads,
            "newest": iso(self.newest),
            "age_seconds": None if self.age_seconds is None else round(self.age_seconds, 3),
            "stale": self.stale,
            "loose": self.loose,
            "committing": self.committing,
            "live": self.live,
        }


@dataclass
class TempTreeListing(ScopedListing):
    """The temporary trees found (spooled on local disk, in path order within each root), with
    counts of the stale ones. A `CleanupListing` of `TempTree`: the stale trees are those to delete."""

    DETAILS: ClassVar[str] = "trees"

    trees: Spool[TempTree] = field(default_factory=Spool)
    count: int = 0
    stale_count: int = 0
    stale_files: int = 0
    stale_bytes: int = 0
    kept_committing: int = 0
    kept_live: int = 0

    def stale(self) -> Iterator[TempTree]:
        return (tree for tree in self.trees if tree.stale)

    def items(self) -> Iterable[TempTree]:
        return self.trees

    def targets(self) -> Iterable[TempTree]:
        return self.stale()

    @property
    def target_count(self) -> int:
        return self.stale_count

    def add(self, tree: TempTree) -> None:
        self.trees.append(tree)
        self.count += 1
        self.kept_committing += tree.committing
        self.kept_live += tree.live
        if tree.stale:
            self.stale_count += 1
            self.stale_files += tree.files
            self.stale_bytes += tree.bytes

    def summary_json(self) -> dict[str, Any]:
        return {
            **self.selection_json(),
            "count": self.count,
            "stale": self.stale_count,
            "stale_bytes": self.stale_bytes,
            "stale_files": self.stale_files,
            "other_jobs": self.other_jobs,
        }

    def describe(self) -> str:
        return (
            f"{self.count} temporary trees under {self.scope}; {self.stale_count} stale "
            f"(no writes for {self.age}): {format_size(self.stale_bytes)} in {self.stale_files} files; "
            f"{self.kept_committing} kept for jobs past their commit point, {self.kept_live} for live jobs"
        )

    def close(self) -> None:
        self.trees.close()


@dataclass(frozen=True)
class TreeOutcome:
    tree: TempTree
    status: str
    """One of deleted, would-delete, active (changed since listed), vanished, failed, not-tried."""
    files: int = 0
    bytes: int = 0
    uploads_aborted: int = 0
    error: str | None = None

    @property
    def label(self) -> str:
        return str(self.tree.path)

    @property
    def measures(self) -> Mapping[str, int]:
        return {"files": self.files, "bytes": self.bytes, "uploads_aborted": self.uploads_aborted}

    def failure_json(self) -> dict[str, Any]:
        return {"path": str(self.tree.path), "error": self.error}

    def to_json(self) -> dict[str, Any]:
        return {**self.tree.to_json(), "status": self.status, "error": self.error}


class TempCleanReport(CleanupReport[TempTreeListing, TreeOutcome]):
    ACTED = (DELETED, WOULD_DELETE)
    ACTION = ("delete", "deleted")
    ITEMS = "{} stale temporary trees"

    @property
    def bytes_reclaimed(self) -> int:
        return self.totals["bytes"]

    def _counts(self) -> dict[str, Any]:
        listing = self.listing
        return {
            "trees_found": listing.count,
            "stale": listing.stale_count,
            "deleted": self.count(DELETED),
            "would_delete": self.count(WOULD_DELETE),
            "skipped_active": self.count(ACTIVE) + listing.count - listing.stale_count,
            "kept_committing": listing.kept_committing,
            "kept_live": listing.kept_live,
            "vanished": self.count(GONE),
            "failed": self.count(FAILED),
            "files": self.totals["files"],
            "bytes": self.bytes_reclaimed,
            "uploads_aborted": self.totals["uploads_aborted"],
        }

    def _details(self, counts: dict[str, Any]) -> str:
        return (
            f"{counts['files']} files, {format_size(counts['bytes'])}, {counts['uploads_aborted']} uploads "
            f"aborted; {counts['skipped_active']} active left alone ({counts['kept_committing']} of jobs "
            f"past their commit point, {counts['kept_live']} of live jobs)"
        )


@dataclass
class _Found:
    """A tree seen in the first listing: what it is, and what it holds so far."""

    kind: str
    job_id: str | None
    loose: bool
    contents: _Contents
    dir_mtime: float | None = None


def find_temp_trees(
    store: Store,
    scope: str | StorePath,
    *,
    older_than: timedelta | str | float = DEFAULT_OLDER_THAN,
    job_id: str | None = None,
    now: datetime | None = None,
    nested: bool = False,
    allow_bucket_root: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    max_job_duration: timedelta | str | float = DEFAULT_MAX_JOB_DURATION,
) -> TempTreeListing:
    """Every temporary tree directly in the `scope` directory (anywhere below it with `nested`).

    Trees are reported stale or not; with `job_id`, only trees of that job are reported. The old
    tree of a job past its commit point, or (unless `job_id` names it) of a live job, is not stale
    (`max_job_duration`: how long a job that recorded no duration of its own is live after setup).
    """
    longest = as_timedelta(max_job_duration, "max_job_duration")
    listing = TempTreeListing.select(
        scope, older_than=older_than, job_id=job_id, now=now, allow_bucket_root=allow_bucket_root
    )
    scope = listing.scope
    progress = progress or NoProgress()
    progress.start("Scanning temporary trees", None)
    found: Spool[TempTree] = Spool()
    destinations: set[StorePath] = set()  # of stale trees that a COMMITTING job may own: one per table
    for trees in _scan(store, scope, nested, progress):
        if job_id is not None:
            mine = {key: tree for key, tree in trees.items() if tree.job_id == job_id}
            listing.other_jobs += len(trees) - len(mine)
            trees = mine
        if store.capabilities.multipart_upload:
            for keys in batches(sorted(trees), 256):
                _add_uploads(store, scope, {key: trees[key] for key in keys}, threads)
        for key in sorted(trees):
            tree = _summarise(scope.join(key) if key else scope, trees[key], listing)
            if tree.stale and tree.job_id and not tree.loose:
                destinations.add(_destination(tree))
            found.append(tree)
    committing = committing_jobs(store, sorted(destinations), threads) if destinations else set()
    live: set[tuple[StorePath, str]] = set()
    if destinations and job_id is None:  # a job named by its ID is one a person says is over
        live = live_jobs(store, sorted(destinations), listing.now, longest, threads)
    for tree in found:
        owner = (_destination(tree), tree.job_id) if tree.stale and tree.job_id and not tree.loose else None
        if owner in committing:
            tree = replace(tree, stale=False, committing=True)
        elif owner in live:
            tree = replace(tree, stale=False, live=True)
        listing.add(tree)
    found.close()
    return listing


def _destination(tree: TempTree) -> StorePath:
    """The destination of the tree's job: the folder holding the tree (or its container)."""
    return tree.path.parent.parent if tree.path.parent.name in CONTAINERS else tree.path.parent


def _scan(store: Store, scope: StorePath, nested: bool, progress: Progress) -> Iterator[dict[str, _Found]]:
    """The trees under `scope`, a root at a time (each tree-named child, or the whole scope when
    `nested`): each root's trees once its listing is done, keyed by path relative to the scope."""
    children = None if nested else store.list_child_dirs(scope)
    roots = [scope] if children is None else [scope.join(n) for n in children if tree_kind(n)]
    for root in roots:
        found: dict[str, _Found] = {}
        for page in batches(store.list_files(root), DELETE_CHUNK):
            progress.advance(len(page))
            for status in page:
                if status.path.is_under(scope):
                    _place(found, status, status.path.relative_to(scope).split("/"), nested)
        if scope.is_local and children is not None:
            _place_empty_local_dirs(store, found, scope, root)
        yield found


def _place(found: dict[str, _Found], status: FileStatus, segments: list[str], nested: bool) -> None:
    """Count the file in the first temporary tree on its path, if any."""
    for index, name in enumerate(segments[:-1]):
        if index > 0 and not nested:
            return
        kind = tree_kind(name)
        if kind is None:
            continue
        is_container = name in CONTAINERS
        loose = is_container and index + 1 == len(segments) - 1
        end = index + 1 if loose or not is_container else index + 2
        key = "/".join(segments[:end])
        if key not in found:
            found[key] = _Found(kind, None if loose else _job_id(kind, segments[end - 1]), loose, _Contents())
        found[key].contents.add_file(status)
        return


def _place_empty_local_dirs(
    store: Store, found: dict[str, _Found], scope: StorePath, root: StorePath
) -> None:
    """Empty local trees (left by crashed jobs) have no files to date them: use the directory's."""
    name = root.name
    kind = tree_kind(name)
    if kind is None:
        return
    keys = [f"{name}/{child}" for child in store.list_child_dirs(root)] if name in CONTAINERS else [name]
    for key in keys:
        if key not in found:
            try:
                mtime = os.stat(scope.join(key).key).st_mtime
            except OSError:
                continue
            found[key] = _Found(kind, _job_id(kind, key.rsplit("/", 1)[-1]), False, _Contents(), mtime)


def _job_id(kind: str, name: str) -> str | None:
    if kind == "magic-job":
        return name[len(MAGIC_PREFIX) :]
    if kind == "spark-staging":
        return name[len(SPARK_STAGING_PREFIX) :]
    if kind == "magic" and name.startswith("job-"):
        return name[len("job-") :]
    return name if kind in ("temporary", "magic") else None


def _add_uploads(store: Store, scope: StorePath, trees: dict[str, _Found], threads: int) -> None:
    """Count each tree's pending uploads in (evidence of a live job, and billed if it is stale)."""

    def listed(key: str) -> _Contents:
        path = scope.join(key)
        contents = _Contents()
        for upload in _uploads_in(store, path, loose=trees[key].loose):
            contents.add_upload(upload)
        return contents

    keys = sorted(trees)
    for key, uploads in zip(keys, parallel_map(keys, listed, threads), strict=True):
        mine = trees[key].contents
        mine.uploads, mine.digest = uploads.uploads, (mine.digest + uploads.digest) % (1 << 64)
        if uploads.newest is not None:
            mine.newest = uploads.newest if mine.newest is None else max(mine.newest, uploads.newest)


def _uploads_in(store: Store, tree: StorePath, *, loose: bool) -> Iterator[PendingUpload]:
    """Pending uploads inside the tree (for loose files, directly in their container)."""
    for upload in store.list_multipart_uploads(tree):
        if upload.path.is_under(tree) and (not loose or upload.path.parent == tree):
            yield upload


def _summarise(path: StorePath, found: _Found, listing: TempTreeListing) -> TempTree:
    contents = found.contents
    times = [t for t in (contents.newest, found.dir_mtime) if t is not None]
    newest = max(times) if times else None
    tree_age = None if newest is None else listing.now.timestamp() - newest
    return TempTree(
        path=path,
        kind=found.kind,
        job_id=found.job_id,
        files=contents.files,
        bytes=contents.bytes,
        uploads=contents.uploads,
        newest=newest,
        age_seconds=tree_age,
        stale=tree_age is None or tree_age >= listing.older_than.total_seconds(),
        loose=found.loose,
        fingerprint=contents.fingerprint,
    )


def clean_temp_trees(
    store: Store,
    listing: TempTreeListing,
    *,
    dry_run: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    keep_outcomes: bool = False,
) -> TempCleanReport:
    """Delete the stale trees of `listing` (abort their uploads first); with `dry_run` only report.

    Trees are deleted on `threads` threads, which a tree's uploads share with the other trees.
    Progress counts files. After `STOP_AFTER_FAILURES` trees failed in a row no more are tried.
    `keep_outcomes` spools every tree's outcome for `report.outcomes` (the CLI's machine formats, `-o json|yaml|plain`).
    """
    upload_threads = max(1, threads // max(1, listing.stale_count))

    def act_all(trees: Iterable[TempTree], record: Callable[[Any], None], bar: Progress) -> None:
        breaker = Breaker()
        source = iter(trees)

        def act(tree: TempTree) -> None:
            outcome = _delete_tree(store, listing.scope, tree, upload_threads, bar)
            breaker.note(outcome.status == FAILED)
            record(outcome)

        # A few trees at a time, so that Ctrl-C stops the run after those in hand.
        for chunk in batches(breaker.items(source), 4 * threads):
            run_parallel(chunk, act, threads)
        for tree in source:
            record(TreeOutcome(tree, NOT_TRIED))

    return TempCleanReport.run_all(
        listing,
        listing.stale(),
        act_all,
        lambda tree: TreeOutcome(tree, WOULD_DELETE, tree.files, tree.bytes),
        dry_run=dry_run,
        description=CHECK_AND_DELETE,
        total=2 * listing.stale_files,
        progress=progress,
        keep_outcomes=keep_outcomes,
    )


def _delete_tree(
    store: Store, scope: StorePath, tree: TempTree, upload_threads: int, progress: Progress
) -> TreeOutcome:
    if not tree.path.is_under(scope) or not (tree_kind(tree.path.name) or tree_kind(tree.path.parent.name)):
        raise AssertionError(f"refusing to delete {tree.path}: not a temporary tree under {scope}")
    done = 0  # steps of CHECK_AND_DELETE counted for this tree: each file is listed once more, then deleted
    keys: Spool[str] = Spool()
    try:
        contents = _contents(store, tree, keys, progress)
        done += min(contents.files, tree.files)  # as `_contents` advanced
        if contents.fingerprint != tree.fingerprint:
            if contents.files or contents.uploads:
                return TreeOutcome(tree, ACTIVE)  # written to (or committed from) since it was listed
            if not _local_dir_exists(tree.path):
                return TreeOutcome(tree, GONE)
        aborted, error = _abort_tree_uploads(store, tree, upload_threads)
        if error is not None:
            return TreeOutcome(tree, FAILED, uploads_aborted=aborted, error=error)
        for chunk in batches(keys, DELETE_CHUNK):  # the files just checked, as they were listed
            store.delete_files([StorePath(tree.path.scheme, tree.path.bucket, key) for key in chunk])
            done += len(chunk)
            progress.advance(len(chunk))
        if not tree.loose:
            store.delete_tree(tree.path)  # what no listing shows: directory markers, empty local directories
        return TreeOutcome(tree, DELETED, contents.files, contents.bytes, aborted)
    except StoreError as error:
        return TreeOutcome(tree, FAILED, error=one_line(error))
    finally:
        keys.close()
        progress.advance(max(0, 2 * tree.files - done))  # a tree left alone counts as done


def _abort_tree_uploads(store: Store, tree: TempTree, threads: int) -> tuple[int, str | None]:
    """Abort the tree's uploads (re-listing the tree to verify): how many, and the first error."""
    if not store.capabilities.multipart_upload:
        return 0, None
    infos = (
        UploadInfo(u.path, u.upload_id, u.initiated, 0.0)
        for u in _uploads_in(store, tree.path, loose=tree.loose)
    )
    aborted = failed = 0
    first: str | None = None
    for outcome in abort_and_verify(store, tree.path, infos, threads=threads):
        if outcome.status == ABORTED:
            aborted += 1
        elif outcome.status != VANISHED:
            failed += 1
            first = first or f"{outcome.upload.path} ({outcome.error or outcome.status})"
    error = None if not failed else f"{failed} uploads not aborted; first: {first}"
    return aborted, error


def _contents(store: Store, tree: TempTree, keys: Spool[str], progress: Progress) -> _Contents:
    """The tree as it is now, summed up as when it was listed; its files' keys go to `keys`."""
    contents = _Contents()
    for page in batches(store.list_files(tree.path), DELETE_CHUNK):
        before = contents.files
        for status in page:
            if not tree.loose or status.path.parent == tree.path:  # a container's job trees are their own
                contents.add_file(status)
                keys.append(status.path.key)
        progress.advance(max(0, min(contents.files, tree.files) - min(before, tree.files)))
    if store.capabilities.multipart_upload:
        for upload in _uploads_in(store, tree.path, loose=tree.loose):
            contents.add_upload(upload)
    return contents


def _local_dir_exists(path: StorePath) -> bool:
    return path.is_local and os.path.isdir(path.key)


def clean_stale_temp_trees(
    store: Store,
    scope: str | StorePath,
    *,
    dry_run: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    keep_outcomes: bool = False,
    **find_options: Any,
) -> TempCleanReport:
    """Find then delete (or, with `dry_run`, report) the stale temporary trees under `scope`.

    `find_options` are those of `find_temp_trees` (older_than, job_id, now, nested, ...).
    """
    listing = find_temp_trees(store, scope, threads=threads, progress=progress, **find_options)
    return clean_temp_trees(
        store, listing, dry_run=dry_run, threads=threads, progress=progress, keep_outcomes=keep_outcomes
    )
