"""Loading the manifests of exactly the task attempts the driver reports as committed.

Success is never inferred from a listing: each reported task's manifest is read by name and
cross-checked (its bytes against the digest its task commit reported, job ID, attempt ID,
destinations) before anything becomes visible.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.paths import InvalidPathError, StorePath, same_path
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError, MissingManifestError
from airflow_commit_provider.core.stages.manifests import ManifestDecoder
from airflow_commit_provider.core.stages.partitions import PartitionRows
from airflow_commit_provider.core.stages.task_commit import read_manifest
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError

#: Threads that load manifests: enough to overlap GETs with parsing (which holds the GIL). Each
#: thread that allocates gets a malloc arena of its own, which keeps what it freed: 16 threads
#: parsing in turn kept 50 MB more at 100k files than 4 did. A manifest streams through its thread
#: (`task_commit.read_manifest`): one chunk of its bytes, one entry and a batch of entries at a time.
LOADING_THREADS = 4
#: Entries a loading thread collects before it takes the spool's lock to add them.
ENTRY_BATCH = 1000


@dataclass
class LoadedJob:
    spool: EntrySpool
    """Every committed entry, sorted by destination."""
    rows: int | None
    partition_rows: PartitionRows
    """Rows per partition directory (unknown unless every task counted them)."""

    def close(self) -> None:
        self.spool.close()
        self.partition_rows.close()

    def __enter__(self) -> LoadedJob:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def load_committed_manifests(
    ctx: JobContext,
    committed: Sequence[TaskCommitResult],
    decoder: ManifestDecoder,
    *,
    exclusive: bool = True,
) -> LoadedJob:
    task_ids = [result.task_id for result in committed]
    duplicates = sorted({task for task in task_ids if task_ids.count(task) > 1})
    if duplicates:
        raise InvalidCommitDataError(
            f"job {ctx.job_id}: tasks reported committed more than once: {duplicates}"
        )
    loaded = LoadedJob(EntrySpool(ctx.layout.destination), None, PartitionRows())
    lock = threading.Lock()
    rows: list[int | None] = []
    changed: list[InvalidCommitDataError] = []

    def load(result: TaskCommitResult) -> None:
        path = ctx.layout.manifest_path(result.task_id)
        batch: list[tuple[CommitEntry, StorePath]] = []

        def add(entry: CommitEntry) -> None:
            dest = _checked_destination(ctx, entry.dest, str(path))
            if entry.source is not None:
                _check_source(ctx, entry.source, dest, str(path))
            batch.append((replace(entry, dest=dest.uri()), dest))
            if len(batch) >= ENTRY_BATCH:
                spool(batch)

        def spool(entries: list[tuple[CommitEntry, StorePath]]) -> None:
            with lock:
                for entry, dest in entries:
                    loaded.spool.append(entry, dest)
            entries.clear()

        try:
            manifest, digest = read_manifest(ctx.store, path, decoder, result.task_id, add)
        except FileNotFoundInStoreError:
            raise MissingManifestError(
                f"job {ctx.job_id}: task {result.task_id} was reported committed but its manifest {path} does not exist"
            ) from None
        spool(batch)
        trusted = exclusive and ctx.store.capabilities.atomic_create_if_absent
        if manifest.job_id != ctx.job_id:
            raise InvalidCommitDataError(
                f"{path}: job ID mismatch: {manifest.job_id!r} is not this job's {ctx.job_id!r}"
            )
        if manifest.task_id != result.task_id:
            raise InvalidCommitDataError(f"{path}: task ID {manifest.task_id!r} is not {result.task_id!r}")
        if manifest.task_attempt_id != result.task_attempt_id:
            if trusted:
                raise InvalidCommitDataError(
                    f"{path}: committed by attempt {manifest.task_attempt_id!r}, "
                    f"but the driver reported {result.task_attempt_id!r}"
                )
            log.warning(
                "%s: last writer %s differs from reported %s",
                path,
                manifest.task_attempt_id,
                result.task_attempt_id,
            )
        with lock:
            ctx.statistics.merge(manifest.statistics)
            rows.append(manifest.rows)
            loaded.partition_rows.add_task(manifest.partition_rows)
            # Refused once every entry is sorted (below), so that damage the other checks name, a
            # destination listed twice among them, is reported as such; this catches the rest.
            if trusted and result.digest is not None and digest != result.digest:
                changed.append(
                    InvalidCommitDataError(
                        f"{path}: not the manifest task attempt {result.task_attempt_id} committed: "
                        "it was changed after its task commit"
                    )
                )

    def duplicate(first: CommitEntry, second: CommitEntry) -> InvalidCommitDataError:
        if first.task_id == second.task_id:
            return InvalidCommitDataError(
                f"{ctx.layout.manifest_path(first.task_id)}: duplicate destination {first.dest}"
            )
        return InvalidCommitDataError(
            f"{ctx.layout.manifest_path(first.task_id)} and {ctx.layout.manifest_path(second.task_id)}: "
            f"duplicate destination {first.dest}"
        )

    try:
        run_parallel(committed, load, min(ctx.options.threads, LOADING_THREADS))
        loaded.spool.sort(duplicate)
        if changed:
            raise changed[0]
        loaded.partition_rows.sort()
    except BaseException:
        loaded.close()
        raise
    loaded.rows = None if not rows or any(r is None for r in rows) else sum(r for r in rows if r is not None)
    return loaded


def _checked_destination(ctx: JobContext, dest: str, source: str) -> StorePath:
    """A destination must lie inside the job's output root and outside every hidden directory."""
    root = ctx.layout.destination
    try:
        path = StorePath.from_uri(dest)
    except InvalidPathError as error:
        raise InvalidCommitDataError(f"{source}: unparseable destination {dest!r}: {error}") from error
    if not path.is_under(root):
        raise InvalidCommitDataError(f"{source}: destination {dest} is outside the job's output root {root}")
    relative = path.relative_to(root)
    if not relative or any(part.startswith(("_", ".")) for part in relative.split("/")):
        raise InvalidCommitDataError(
            f"{source}: destination {dest} is a hidden or reserved path under {root}"
        )
    # One object, one name: `s3a://b/k` and `s3://b/k` are the same file, so use the root's scheme
    # for the duplicate check, the conflict checks and the `_SUCCESS` file list.
    return StorePath(root.scheme, path.bucket, path.key)


def _check_source(ctx: JobContext, source: str, dest: StorePath, manifest: str) -> None:
    """A file to rename must be the job's own: in its directory, or (file-v2, which published at
    task commit) the destination itself. A forged manifest could otherwise move another table's
    file into this one, or fail half-way through job commit on a source that cannot exist."""
    try:
        path = StorePath.from_uri(source)
    except InvalidPathError as error:
        raise InvalidCommitDataError(f"{manifest}: unparseable source {source!r}: {error}") from error
    if not (path.is_under(ctx.layout.job_dir) or same_path(path, dest)):
        raise InvalidCommitDataError(
            f"{manifest}: source {source} is outside the job's directory {ctx.layout.job_dir}"
        )
