"""Saving a task's manifest: the single atomic write that commits a task attempt.

On stores with create-if-absent the first attempt to save wins; a later attempt of the same
task adopts the winner instead of failing forever (HADOOP-17258) or replacing it. Elsewhere
the last attempt wins, as in Hadoop, and the driver's list decides.

A manifest lists every file its task wrote (75 MB for 100k files), so it is never held in memory
(HADOOP-19047): the task writes it to a local temp file (`written_manifest`), hashing it as it
goes, and uploads that file in one streamed PUT; whoever reads one back streams it too
(`read_manifest`), hashing what it reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from airflow_commit_provider.core.formats.json_stream import Readable, Writable
from airflow_commit_provider.core.formats.jsonio import refuse_oversized
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError, JobNotActiveError
from airflow_commit_provider.core.stages.job_state import job_is_active, require_active_job
from airflow_commit_provider.core.stages.manifests import EntrySink, ManifestDecoder, ManifestSummary
from airflow_commit_provider.core.store.base import FileAlreadyExistsError, FileNotFoundInStoreError, Store


@dataclass(frozen=True)
class ManifestFile:
    """A task's manifest, written to a local temp file (`body`), with what task commit reports of it."""

    summary: ManifestSummary
    body: IO[bytes]
    digest: str


def manifest_digest(data: bytes) -> str:
    """What a task commit result holds of its manifest's bytes (`TaskCommitResult.digest`)."""
    return _Digest().update(data).hexdigest()


class _Digest:
    """`manifest_digest` of bytes that go past in pieces, and how many there were."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.size = 0

    def update(self, data: bytes) -> _Digest:
        self._hash.update(data)
        self.size += len(data)
        return self

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class _DigestingWriter:
    def __init__(self, out: Writable, digest: _Digest) -> None:
        self._out = out
        self._digest = digest

    def write(self, data: bytes) -> None:
        self._digest.update(data)
        self._out.write(data)


class _DigestingReader:
    def __init__(self, stream: Readable, digest: _Digest) -> None:
        self._stream = stream
        self._digest = digest

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._digest.update(data)
        return data


@contextlib.contextmanager
def written_manifest(summary: ManifestSummary, write: Callable[[Writable], Any]) -> Iterator[ManifestFile]:
    """The manifest `write(out)` writes, in a local temp file (unlinked at once, closed on exit),
    hashed as it is written. One larger than a commit file may be is refused here, naming the
    attempt: job commit could never read it."""
    with tempfile.TemporaryFile(prefix="task-manifest-") as body:
        digest = _Digest()
        write(_DigestingWriter(body, digest))
        refuse_oversized(digest.size, f"the manifest of task attempt {summary.task_attempt_id}")
        body.flush()
        yield ManifestFile(summary, body, digest.hexdigest())


def read_manifest(
    store: Store, path: StorePath, decoder: ManifestDecoder, task_id: str, on_entry: EntrySink | None = None
) -> tuple[ManifestSummary, str]:
    """The manifest at `path` decoded as it streams in (each entry to `on_entry`), and the digest
    of its bytes. FileNotFoundInStoreError when there is none."""
    digest = _Digest()
    with store.open_read(path) as stream:
        summary = decoder(_DigestingReader(stream, digest), str(path), task_id, on_entry)
    return summary, digest.hexdigest()


def save_task_manifest(
    ctx: JobContext,
    manifest: ManifestFile,
    decoder: ManifestDecoder,
    *,
    exclusive: bool = True,
) -> TaskCommitResult:
    """Publish `manifest` as the commit of its task; returns the result the driver should use.

    If another attempt already committed this task, returns *its* result with `adopted_from`
    set; the caller must then discard this attempt's own output.
    """
    summary = manifest.summary
    require_active_job(ctx, f"commit task attempt {summary.task_attempt_id}")
    path = ctx.layout.manifest_path(summary.task_id)
    digest = manifest.digest
    if exclusive and ctx.store.capabilities.atomic_create_if_absent:
        try:
            ctx.store.write_stream(path, manifest.body, if_absent=True)
        except FileAlreadyExistsError:
            winner, digest = read_manifest(ctx.store, path, decoder, summary.task_id)
            if winner.job_id != ctx.job_id:
                raise InvalidCommitDataError(
                    f"{path}: job ID {winner.job_id!r} is not {ctx.job_id!r}"
                ) from None
            if winner.task_attempt_id != summary.task_attempt_id:
                log.info(
                    "task %s was already committed by %s; attempt %s adopts it",
                    summary.task_id,
                    winner.task_attempt_id,
                    summary.task_attempt_id,
                )
                return _result(path, winner, digest, adopted_from=summary.task_attempt_id)
            summary = winner  # this attempt's own commit, whose reply was lost: as it is stored
    else:
        ctx.store.write_stream(path, manifest.body)
    if not job_is_active(ctx):
        ctx.store.delete(path)
        raise JobNotActiveError(
            f"job {ctx.job_id} ended while task attempt {summary.task_attempt_id} was committing; its output is discarded"
        )
    return _result(path, summary, digest)


def _result(
    path: StorePath, manifest: ManifestSummary, digest: str, adopted_from: str | None = None
) -> TaskCommitResult:
    return TaskCommitResult(
        task_id=manifest.task_id,
        task_attempt_id=manifest.task_attempt_id,
        manifest=path.uri(),
        files=manifest.files,
        bytes=manifest.total_bytes,
        rows=manifest.rows,
        adopted_from=adopted_from,
        digest=digest,
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
    try:
        return read_manifest(ctx.store, ctx.layout.manifest_path(task_id), decoder, task_id)[
            0
        ].task_attempt_id
    except (FileNotFoundInStoreError, InvalidCommitDataError):
        return None
