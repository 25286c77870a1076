"""Saving a task's manifest: the single atomic write that commits a task attempt.

On stores with create-if-absent the first attempt to save wins; a later attempt of the same
task adopts the winner instead of failing forever (HADOOP-17258) or replacing it. Elsewhere
the last attempt wins, as in Hadoop, and the driver's list decides.
"""

from __future__ import annotations

import hashlib

from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError, JobNotActiveError
from airflow_commit_provider.core.stages.job_state import job_is_active, require_active_job
from airflow_commit_provider.core.stages.manifests import LoadedManifest, ManifestDecoder
from airflow_commit_provider.core.store.base import FileAlreadyExistsError, FileNotFoundInStoreError


def save_task_manifest(
    ctx: JobContext,
    manifest: LoadedManifest,
    data: bytes,
    decoder: ManifestDecoder,
    *,
    exclusive: bool = True,
) -> TaskCommitResult:
    """Publish `data` as the commit of `manifest.task_id`; returns the result the driver should use.

    If another attempt already committed this task, returns *its* result with `adopted_from`
    set; the caller must then discard this attempt's own output.
    """
    require_active_job(ctx, f"commit task attempt {manifest.task_attempt_id}")
    path = ctx.layout.manifest_path(manifest.task_id)
    if exclusive and ctx.store.capabilities.atomic_create_if_absent:
        try:
            ctx.store.write_bytes(path, data, if_absent=True)
        except FileAlreadyExistsError:
            committed = read_json_bytes(ctx.store, path)
            winner = decoder(committed, str(path))
            if winner.job_id != ctx.job_id:
                raise InvalidCommitDataError(
                    f"{path}: job ID {winner.job_id!r} is not {ctx.job_id!r}"
                ) from None
            if winner.task_attempt_id != manifest.task_attempt_id:
                log.info(
                    "task %s was already committed by %s; attempt %s adopts it",
                    manifest.task_id,
                    winner.task_attempt_id,
                    manifest.task_attempt_id,
                )
                return _result(path, winner, committed, adopted_from=manifest.task_attempt_id)
            data = committed  # this attempt's own commit, whose reply was lost: as it is stored
    else:
        ctx.store.write_bytes(path, data)
    if not job_is_active(ctx):
        ctx.store.delete(path)
        raise JobNotActiveError(
            f"job {ctx.job_id} ended while task attempt {manifest.task_attempt_id} was committing; its output is discarded"
        )
    return _result(path, manifest, data)


def manifest_digest(data: bytes) -> str:
    """What a task commit result holds of its manifest's bytes (`TaskCommitResult.digest`)."""
    return hashlib.sha256(data).hexdigest()


def _result(
    path: StorePath, manifest: LoadedManifest, data: bytes, adopted_from: str | None = None
) -> TaskCommitResult:
    return TaskCommitResult(
        task_id=manifest.task_id,
        task_attempt_id=manifest.task_attempt_id,
        manifest=path.uri(),
        files=len(manifest.entries),
        bytes=manifest.total_bytes,
        rows=manifest.rows,
        adopted_from=adopted_from,
        digest=manifest_digest(data),
    )


def attempt_holds_task_commit(
    ctx: JobContext, task_id: str, task_attempt_id: str, decoder: ManifestDecoder
) -> bool:
    """True if the attempt's manifest is its task's commit in a job that is still active.

    Aborting such an attempt must keep its output: its commit may have reached the store while
    the reply was lost, and the task's next attempt adopts it. Once the job is over, it may go.
    """
    return task_commit_holder(ctx, task_id, decoder) == task_attempt_id and job_is_active(ctx)


def task_commit_holder(ctx: JobContext, task_id: str, decoder: ManifestDecoder) -> str | None:
    """The attempt whose manifest is the task's commit now, None if none is (or it is unreadable)."""
    path = ctx.layout.manifest_path(task_id)
    try:
        data = read_json_bytes(ctx.store, path)
    except FileNotFoundInStoreError:
        return None
    try:
        return decoder(data, str(path)).task_attempt_id
    except InvalidCommitDataError:
        return None
