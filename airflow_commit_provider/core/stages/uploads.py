"""The records of multipart uploads that stay pending until job commit, and which of them to abort.

The requests themselves go through the store's commit operations (`ctx.operations`,
`core.commit_operations`); this module decides what they act on.

Every upload an attempt starts is recorded under the job directory before data is sent, so
abort and cleanup can cancel exactly this job's uploads, including those of crashed
attempts, without listing (and endangering) anyone else's under the destination.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Collection, Iterable, Iterator
from typing import TypeVar

from airflow_commit_provider.core.commit_operations import CommitOperations
from airflow_commit_provider.core.formats.jsonio import load_json, read_json_bytes
from airflow_commit_provider.core.formats.pending import is_pending_file, read_pending_commits
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import (
    SortedSpool,
    grouped,
    join_sorted,
    key_order,
    record_size,
    spooled,
)
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError
from airflow_commit_provider.core.store.base import Store, StoreError

T = TypeVar("T")


#: Uploads one record names at most: an attempt records its uploads in records of this many, so no
#: record is large to write or to read (about 1.5 MB), however many files the attempt wrote.
UPLOADS_PER_RECORD = 10_000


def record_uploads(
    ctx: JobContext, task_attempt_id: str, uploads: Iterable[tuple[StorePath, str]]
) -> StorePath | None:
    """Write one record naming `uploads` (at most `UPLOADS_PER_RECORD`); returns its path (None if
    there was nothing to record)."""
    records = [{"uri": path.uri(), "uploadId": upload_id} for path, upload_id in uploads]
    if not records:
        return None
    path = ctx.layout.upload_records_dir(task_attempt_id).join(f"{uuid.uuid4().hex}.json")
    ctx.store.write_bytes(path, json.dumps(records).encode("utf-8"))
    return path


def consolidate_upload_records(
    ctx: JobContext,
    task_attempt_id: str,
    uploads: Iterable[tuple[StorePath, str]],
    records: Iterable[StorePath],
) -> None:
    """Replace an attempt's per-upload `records` with records of all its `uploads`,
    `UPLOADS_PER_RECORD` to a record; both are streamed.

    Job commit's cleanup then deletes one record per 10,000 files instead of one per file, as
    Hadoop's task commit turns its `.pending` files into one `.pendingset`. The merged records are
    written before any other is deleted, so every upload stays findable at every moment.
    """
    for batch in batched(uploads, UPLOADS_PER_RECORD):
        record_uploads(ctx, task_attempt_id, batch)
    ctx.store.delete_files(records)


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of `size` (the last one shorter), as they come (`itertools.batched` is 3.12)."""
    source = iter(items)
    while batch := list(itertools.islice(source, size)):
        yield batch


def recorded_uploads(
    ctx: JobContext, task_attempt_id: str | None = None, *, skip_attempts: Collection[str] = ()
) -> Iterator[tuple[str, StorePath, str]]:
    """(task attempt, destination, upload ID) of every recorded upload of the job or one attempt,
    one record file at a time.

    Records of `skip_attempts` are not read at all: a record's attempt is its directory's name, so
    job commit's cleanup skips one GET per file of every committed magic attempt.
    """
    root = ctx.layout.upload_records_dir(task_attempt_id)
    for status in ctx.store.list_files(root):
        attempt = status.path.parent.name
        if attempt in skip_attempts:
            continue
        for path, upload_id in parse_upload_records(
            read_json_bytes(ctx.store, status.path), str(status.path)
        ):
            yield attempt, path, upload_id


def parse_upload_records(data: bytes, source: str) -> list[tuple[StorePath, str]]:
    """The (destination, upload ID) pairs of one record file; InvalidCommitDataError names a damaged one."""
    records = load_json(data, source)
    try:
        return [(StorePath.from_uri(record["uri"]), str(record["uploadId"])) for record in records]
    except (ValueError, KeyError, TypeError) as error:  # InvalidPathError is a ValueError
        raise InvalidCommitDataError(f"{source}: damaged upload record: {error}") from error


def hadoop_pending_uploads(store: Store, magic_job_dir: StorePath) -> set[tuple[StorePath, str]]:
    """(destination, upload ID) of every upload Hadoop's S3A magic committer listed under its job
    directory ``__magic_job-<id>``: a task's ``.pendingset`` and each file's ``.pending``.

    Its uploads' keys are the final ones and carry no job ID, so these files are the only way to
    tell one magic job's pending uploads from another's. A file being written or deleted right now
    is skipped with a warning.
    """
    found: set[tuple[StorePath, str]] = set()
    for status in store.list_files(magic_job_dir):
        if not is_pending_file(status.path.name):
            continue
        try:
            commits = read_pending_commits(read_json_bytes(store, status.path), str(status.path))
        except (InvalidCommitDataError, StoreError) as error:
            log.warning("skipping unreadable %s: %s", status.path, error)
            continue
        # `uri` is the file's magic path; the upload is on the destination key.
        found.update(
            (StorePath(magic_job_dir.scheme, commit.bucket, commit.destination_key), commit.upload_id)
            for commit in commits
        )
    return found


def abort_hadoop_magic_uploads(store: Store, destination: str | StorePath, job_id: str) -> int:
    """Abort the pending uploads S3A's magic committer listed for `job_id`; how many were aborted.

    Only uploads the store still lists as pending are aborted and counted: S3 (and SeaweedFS)
    answer an abort of an upload already completed or aborted with success too, so counting the
    answers would report uploads that were never there. Every one is tried; one that fails is left
    (and not counted). Must run before the job's ``__magic_job-`` directory is deleted: its
    ``.pending``/``.pendingset`` files are the only list of them.
    """
    if not store.capabilities.multipart_upload:
        return 0
    root = StorePath.parse(destination)
    listed = hadoop_pending_uploads(store, JobLayout(root, validate_job_id(job_id), magic=True).job_dir)
    if not listed:
        return 0
    operations = CommitOperations(store)
    pending = {(upload.path, upload.upload_id) for upload in operations.list_pending(root)}
    return operations.abort_uploads(sorted(listed & pending), keep_going=True).aborted


def discard_attempt_uploads(
    ctx: JobContext, task_attempt_id: str, uploads: Iterable[tuple[StorePath, str]] = ()
) -> int:
    """Abort an attempt's uploads (those given and those recorded), then delete its records.

    Afterwards nothing of the attempt remains in the store, even when the job is already over
    and its cleanup has run (a late attempt would otherwise leave its records behind). An upload
    both given and recorded (or recorded twice, mid-consolidation) is aborted once: they meet in
    a spool, not a set, so an attempt of 100k files holds none of them in memory.
    """
    found = SortedSpool(prefix="discard-uploads-")
    try:
        for path, upload in itertools.chain(
            uploads, ((path, upload) for _attempt, path, upload in recorded_uploads(ctx, task_attempt_id))
        ):
            record = ((path.uri(), upload),)
            found.add(record, record_size(record))
        found.sort(lambda first, _again: first)
        aborted = ctx.operations.abort_uploads(
            (StorePath.from_uri(uri), upload) for ((uri, upload),) in found
        ).checked()
    finally:
        found.close()
    ctx.store.delete_tree(ctx.layout.upload_records_dir(task_attempt_id))
    return aborted.settled


def abort_uncommitted_uploads(ctx: JobContext, committed_attempts: set[str], *, job_committed: bool) -> int:
    """Abort every upload the job's records name that its commit did not complete.

    Uploads of attempts not committed are all aborted. Those of committed attempts are their tasks'
    output, except any a committed manifest left out (a damaged or forged pendingset, say
    ``"commits": []``). Once the job is committed (its record is written after every upload it
    committed was completed), those are exactly the recorded ones the store still lists as pending.
    Committed attempts' records are read only when the store lists a pending upload under the
    destination at all, so a clean commit costs one listing, not one GET per task; then they are
    merged with that listing, both sorted through spools, so nothing is held per upload.
    """
    root = ctx.layout.destination
    listing = ctx.operations.list_pending(root) if job_committed and committed_attempts else iter(())
    first = next(listing, None)

    def doomed() -> Iterator[tuple[StorePath, str]]:
        committed = SortedSpool(prefix="commit-recorded-uploads-")
        try:
            for attempt, path, upload in recorded_uploads(
                ctx, skip_attempts=() if first is not None else committed_attempts
            ):
                if attempt not in committed_attempts:
                    yield path, upload
                elif path.is_under(root):  # only those can be pending under the destination
                    record = (key_order(path.relative_to(root)), upload, path.key)
                    committed.add(record, record_size(record))
            if first is None or committed.count == 0:
                return
            committed.sort()
            with spooled(
                (
                    (key_order(found.path.relative_to(root)), found.upload_id)
                    for found in itertools.chain([first], listing)
                ),
                prefix="commit-pending-uploads-",
            ) as pending:
                for recorded, listed in join_sorted(grouped(committed), grouped(pending)):
                    if recorded is None or listed is None:
                        continue
                    still_pending = {upload for _key, upload in listed[1]}
                    for _key, upload, key in recorded[1]:
                        if upload in still_pending:
                            yield StorePath(root.scheme, root.bucket, key), upload
        finally:
            committed.close()

    aborted = ctx.operations.abort_uploads(doomed()).checked().settled
    if aborted:
        log.info("job %s: aborted %d uploads it did not commit", ctx.job_id, aborted)
    return aborted
