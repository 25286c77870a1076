"""Finding and deleting stale temporary trees that failed or killed jobs leave in table roots.

Trees are `_temporary/<job>` and `__magic/<job>` (one tree per job, so one live job does not
shield or endanger another), `__magic_job-*` and `.spark-staging-*`. A tree is stale when its
newest write (file or pending upload) is older than the threshold. Just before deleting, the
tree is listed again: if anything changed since the first listing, a job is still writing to
it and it is left alone. Nothing outside these trees is ever deleted.

The tree of a job past its commit point but not yet committed (COMMITTING) is never deleted,
however old: it holds the manifests that rolling the job forward needs (see `committing`).
Nor is `_airflow_commit/`, the records directory, ever a temporary tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from airflow_commit_provider.core.cleanup.committing import committing_jobs
from airflow_commit_provider.core.cleanup.common import NoProgress, Progress, format_size, iso, one_line
from airflow_commit_provider.core.cleanup.durations import DEFAULT_OLDER_THAN
from airflow_commit_provider.core.cleanup.reports import FAILED, CleanupReport, ScopedListing
from airflow_commit_provider.core.cleanup.uploads import ABORTED, VANISHED, UploadInfo, abort_and_verify
from airflow_commit_provider.core.layout import MAGIC_PREFIX, TEMPORARY_DIR
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus, PendingUpload, Store, StoreError

MAGIC_DIR = "__magic"
SPARK_STAGING_PREFIX = ".spark-staging-"
#: Directories holding one subdirectory per job; each subdirectory is a tree of its own.
CONTAINERS = {TEMPORARY_DIR: "temporary", MAGIC_DIR: "magic"}

DELETED, WOULD_DELETE, ACTIVE, GONE = "deleted", "would-delete", "active", "vanished"


def tree_kind(name: str) -> str | None:
    """The kind of temporary tree a directory name starts, or None for ordinary directories."""
    if name in CONTAINERS:
        return CONTAINERS[name]
    if name.startswith(MAGIC_PREFIX):
        return "magic-job"
    if name.startswith(SPARK_STAGING_PREFIX):
        return "spark-staging"
    return None


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
    fingerprint: frozenset[tuple[str, int, float]] = field(default=frozenset(), repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": str(self.path),
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
        }


@dataclass
class TempTreeListing(ScopedListing):
    trees: list[TempTree] = field(default_factory=list)

    @property
    def stale(self) -> list[TempTree]:
        return [tree for tree in self.trees if tree.stale]

    def to_json(self, sample: int | None = None) -> dict[str, Any]:
        shown = self.trees if sample is None else self.trees[:sample]
        return {
            **self.selection_json(),
            "count": len(self.trees),
            "stale": len(self.stale),
            "stale_bytes": sum(tree.bytes for tree in self.stale),
            "stale_files": sum(tree.files for tree in self.stale),
            "other_jobs": self.other_jobs,
            "trees": [tree.to_json() for tree in shown],
        }


@dataclass(frozen=True)
class TreeOutcome:
    tree: TempTree
    status: str
    """One of deleted, would-delete, active (changed since listed), vanished, failed."""
    files: int = 0
    bytes: int = 0
    uploads_aborted: int = 0
    error: str | None = None

    @property
    def label(self) -> str:
        return str(self.tree.path)

    def failure_json(self) -> dict[str, Any]:
        return {"url": str(self.tree.path), "error": self.error}

    def to_json(self) -> dict[str, Any]:
        return {**self.tree.to_json(), "status": self.status, "error": self.error}


class TempCleanReport(CleanupReport[TempTreeListing, TreeOutcome]):
    ACTED = (DELETED, WOULD_DELETE)
    DETAILS = "trees"
    ACTION = ("delete", "deleted")
    ITEMS = "{} stale temporary trees"

    @property
    def bytes_reclaimed(self) -> int:
        return sum(o.bytes for o in self.acted)

    def _counts(self, acted: list[TreeOutcome]) -> dict[str, Any]:
        return {
            "trees_found": len(self.listing.trees),
            "stale": len(self.listing.stale),
            "deleted": self.count(DELETED),
            "would_delete": self.count(WOULD_DELETE),
            "skipped_active": self.count(ACTIVE) + len(self.listing.trees) - len(self.listing.stale),
            "kept_committing": sum(1 for tree in self.listing.trees if tree.committing),
            "vanished": self.count(GONE),
            "failed": len(self.failed),
            "files": sum(o.files for o in acted),
            "bytes": self.bytes_reclaimed,
            "uploads_aborted": sum(o.uploads_aborted for o in self.outcomes),
        }

    def _details(self, counts: dict[str, Any]) -> str:
        return (
            f"{counts['files']} files, {format_size(counts['bytes'])}, {counts['uploads_aborted']} uploads "
            f"aborted; {counts['skipped_active']} active left alone ({counts['kept_committing']} of jobs "
            "past their commit point)"
        )


@dataclass
class _Found:
    kind: str
    job_id: str | None
    loose: bool
    files: list[FileStatus] = field(default_factory=list)
    uploads: list[PendingUpload] = field(default_factory=list)
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
) -> TempTreeListing:
    """Every temporary tree directly in the `scope` directory (anywhere below it with `nested`).

    Trees are reported stale or not; with `job_id`, only trees of that job are reported.
    """
    listing = TempTreeListing.select(
        scope, older_than=older_than, job_id=job_id, now=now, allow_bucket_root=allow_bucket_root
    )
    directory = listing.scope
    progress = progress or NoProgress()
    progress.start("Scanning temporary trees", None)
    found = _scan(store, directory, nested, progress)
    if job_id is not None:
        mine = {key: tree for key, tree in found.items() if tree.job_id == job_id}
        listing.other_jobs = len(found) - len(mine)
        found = mine
    if store.capabilities.multipart_upload:
        keys = sorted(found)
        for key, uploads in zip(
            keys, parallel_map(keys, lambda k: _uploads_in(store, directory.join(k)), threads), strict=True
        ):
            if found[key].loose:
                uploads = [u for u in uploads if u.path.parent == directory.join(key)]
            found[key].uploads = uploads
    clock = listing.now.timestamp()
    for key in sorted(found):
        path = directory.join(key) if key else directory
        listing.trees.append(_summarise(path, found[key], clock, listing.older_than))
    listing.trees = _keep_committing(store, listing.trees, threads)
    return listing


def _destination(tree: TempTree) -> StorePath:
    """The directory the tree's job writes to: the one holding the tree (or its container)."""
    return tree.path.parent.parent if tree.path.parent.name in CONTAINERS else tree.path.parent


def _keep_committing(store: Store, trees: list[TempTree], threads: int) -> list[TempTree]:
    """Stale trees of COMMITTING jobs become kept (one records listing per destination)."""
    stale = [tree for tree in trees if tree.stale and tree.job_id and not tree.loose]
    if not stale:
        return trees
    committing = committing_jobs(store, {_destination(tree) for tree in stale}, threads)
    return [
        replace(tree, stale=False, committing=True)
        if tree in stale and (_destination(tree), tree.job_id) in committing
        else tree
        for tree in trees
    ]


def _scan(store: Store, scope: StorePath, nested: bool, progress: Progress) -> dict[str, _Found]:
    found: dict[str, _Found] = {}
    children = None if nested else store.list_child_dirs(scope)
    roots = [scope] if children is None else [scope.join(n) for n in children if tree_kind(n)]
    for root in roots:
        for status in store.list_files(root):
            progress.advance()
            if status.path.is_under(scope):
                _place(found, status, status.path.relative_to(scope).split("/"), nested)
    if scope.is_local and children is not None:
        _place_empty_local_dirs(store, found, scope, children)
    return found


def _place(found: dict[str, _Found], status: FileStatus, segments: list[str], nested: bool) -> None:
    """File the status under the first temporary tree on its path, if any."""
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
            found[key] = _Found(kind, None if loose else _job_id(kind, segments[end - 1]), loose)
        found[key].files.append(status)
        return


def _place_empty_local_dirs(
    store: Store, found: dict[str, _Found], scope: StorePath, children: list[str]
) -> None:
    """Empty local trees (left by crashed jobs) have no files to date them: use the directory's."""
    for name in children:
        kind = tree_kind(name)
        if kind is None:
            continue
        keys = [name]
        if name in CONTAINERS:
            keys = [f"{name}/{child}" for child in store.list_child_dirs(scope.join(name))]
        for key in keys:
            if key not in found:
                try:
                    mtime = os.stat(scope.join(key).key).st_mtime
                except OSError:
                    continue
                found[key] = _Found(kind, _job_id(kind, key.rsplit("/", 1)[-1]), False, dir_mtime=mtime)


def _job_id(kind: str, name: str) -> str | None:
    if kind == "magic-job":
        return name[len(MAGIC_PREFIX) :]
    if kind == "spark-staging":
        return name[len(SPARK_STAGING_PREFIX) :]
    if kind == "magic" and name.startswith("job-"):
        return name[len("job-") :]
    return name if kind in ("temporary", "magic") else None


def _uploads_in(store: Store, tree: StorePath) -> list[PendingUpload]:
    """Pending uploads inside the tree: evidence of a live job, and billed if the tree is stale."""
    return [u for u in store.list_multipart_uploads(tree) if u.path.is_under(tree)]


def _summarise(path: StorePath, found: _Found, clock: float, age: timedelta) -> TempTree:
    times = [s.modified for s in found.files] + [u.initiated for u in found.uploads]
    if found.dir_mtime is not None:
        times.append(found.dir_mtime)
    newest = max(times) if times else None
    tree_age = None if newest is None else clock - newest
    return TempTree(
        path=path,
        kind=found.kind,
        job_id=found.job_id,
        files=len(found.files),
        bytes=sum(s.size for s in found.files),
        uploads=len(found.uploads),
        newest=newest,
        age_seconds=tree_age,
        stale=tree_age is None or tree_age >= age.total_seconds(),
        loose=found.loose,
        fingerprint=_fingerprint(found.files, found.uploads),
    )


def _fingerprint(
    files: Iterable[FileStatus], uploads: Iterable[PendingUpload]
) -> frozenset[tuple[str, int, float]]:
    return frozenset(
        [(s.path.key, s.size, s.modified) for s in files]
        + [(f"upload:{u.upload_id}", 0, u.initiated) for u in uploads]
    )


def clean_temp_trees(
    store: Store,
    listing: TempTreeListing,
    *,
    dry_run: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
) -> TempCleanReport:
    """Delete the stale trees of `listing` (abort their uploads first); with `dry_run` only report.

    Trees are deleted on `threads` threads, which a tree's uploads share with the other trees.
    """
    upload_threads = max(1, threads // max(1, len(listing.stale)))
    return TempCleanReport.run(
        listing,
        listing.stale,
        lambda tree: _delete_tree(store, listing.scope, tree, upload_threads),
        lambda tree: TreeOutcome(tree, WOULD_DELETE, tree.files, tree.bytes),
        dry_run=dry_run,
        description="Deleting temporary trees",
        threads=threads,
        progress=progress,
    )


def _delete_tree(store: Store, scope: StorePath, tree: TempTree, upload_threads: int) -> TreeOutcome:
    if not tree.path.is_under(scope) or not (tree_kind(tree.path.name) or tree_kind(tree.path.parent.name)):
        raise AssertionError(f"refusing to delete {tree.path}: not a temporary tree under {scope}")
    try:
        files, uploads = _contents(store, tree)
        if _fingerprint(files, uploads) != tree.fingerprint:
            if files or uploads:
                return TreeOutcome(tree, ACTIVE)  # written to (or committed from) since it was listed
            if not _local_dir_exists(tree.path):
                return TreeOutcome(tree, GONE)
        aborted, error = _abort_tree_uploads(store, tree.path, uploads, upload_threads)
        if error is not None:
            return TreeOutcome(tree, FAILED, uploads_aborted=aborted, error=error)
        if tree.loose:
            store.delete_files(s.path for s in files)
        else:
            store.delete_tree(tree.path)
        return TreeOutcome(tree, DELETED, len(files), sum(s.size for s in files), aborted)
    except StoreError as error:
        return TreeOutcome(tree, FAILED, error=one_line(error))


def _abort_tree_uploads(
    store: Store, tree: StorePath, uploads: list[PendingUpload], threads: int
) -> tuple[int, str | None]:
    """Abort the tree's uploads (re-listing the tree to verify): how many, and the first error."""
    infos = [UploadInfo(u.path, u.upload_id, u.initiated, 0.0) for u in uploads]
    outcomes = abort_and_verify(store, tree, infos, threads=threads)
    failed = [o for o in outcomes if o.status not in (ABORTED, VANISHED)]
    error = None
    if failed:
        error = f"{len(failed)} uploads not aborted; first: {failed[0].upload.path} ({failed[0].error})"
    return sum(o.status == ABORTED for o in outcomes), error


def _contents(store: Store, tree: TempTree) -> tuple[list[FileStatus], list[PendingUpload]]:
    files = list(store.list_files(tree.path))
    uploads = _uploads_in(store, tree.path) if store.capabilities.multipart_upload else []
    if tree.loose:  # only what sits directly in the container; its job subtrees are trees of their own
        files = [s for s in files if s.path.parent == tree.path]
        uploads = [u for u in uploads if u.path.parent == tree.path]
    return files, uploads


def _local_dir_exists(path: StorePath) -> bool:
    return path.is_local and os.path.isdir(path.key)


def clean_stale_temp_trees(
    store: Store,
    scope: str | StorePath,
    *,
    dry_run: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    **find_options: Any,
) -> TempCleanReport:
    """Find then delete (or, with `dry_run`, report) the stale temporary trees under `scope`.

    `find_options` are those of `find_temp_trees` (older_than, job_id, now, nested, ...).
    """
    listing = find_temp_trees(store, scope, threads=threads, progress=progress, **find_options)
    return clean_temp_trees(store, listing, dry_run=dry_run, threads=threads, progress=progress)
