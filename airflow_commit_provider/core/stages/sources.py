"""Checking, before the commit point, that what job commit is about to commit is there.

A manifest is its task's word, but a damaged or forged one can name a source in the job's own
directory that does not exist, has another size, or is named twice, or an upload that is not
pending (another upload ID, or another key). Committing would then fail after the commit point,
and the job could neither commit nor abort. Hadoop's manifest committer validates renamed files
only afterwards, and only on request (one getFileStatus per file); here the check refuses the job
before it is decided, from one listing (of the job directory, or of the destination's pending
uploads) rather than one request per file, holding one 8-byte digest per listed item as the spool
does per entry. An upload's parts (ETags, length) are not listed: that would cost a request each.
"""

from __future__ import annotations

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool, text_digest
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError


def check_sources_exist(ctx: JobContext, spool: EntrySpool) -> None:
    """Refuse the job, naming the manifest, if an entry's source file or upload is not listed.

    Sources outside the job's directory (file-v2's, already in place at their destination) are
    checked where they are committed. Each listed item answers for one entry only: a source or
    upload named twice is refused.
    """
    job_dir = ctx.layout.job_dir
    files: set[int] | None = None
    uploads: set[int] | None = None
    for entry in spool:
        if entry.upload_id is not None:
            if uploads is None:
                uploads = {
                    _digest(upload.path, upload.upload_id)
                    for upload in ctx.store.list_multipart_uploads(ctx.layout.destination)
                }
            _take(ctx, uploads, _digest(StorePath.from_uri(entry.dest), entry.upload_id), entry, "upload")
        elif entry.source is not None:
            source = StorePath.from_uri(entry.source)  # parsed once already, when its manifest was loaded
            if not source.is_under(job_dir):
                continue
            if files is None:
                files = {_digest(status.path, status.size) for status in ctx.store.list_files(job_dir)}
            _take(ctx, files, _digest(source, entry.size), entry, "source")


def _take(ctx: JobContext, listed: set[int], digest: int, entry: CommitEntry, kind: str) -> None:
    if digest not in listed:
        manifest = ctx.layout.manifest_path(entry.task_id)
        if kind == "upload":
            raise InvalidCommitDataError(
                f"{manifest}: upload {entry.upload_id!r} of {entry.dest} is not pending under "
                f"{ctx.layout.destination} (missing, of another key, or named twice)"
            )
        raise InvalidCommitDataError(
            f"{manifest}: source {entry.source} of {entry.size} bytes is not in the job's directory "
            f"{ctx.layout.job_dir} (missing, of another size, or named twice)"
        )
    listed.remove(digest)


def _digest(path: StorePath, detail: object) -> int:
    """One file or upload by bucket, key and a detail (size, upload ID): `s3` and `s3a` URIs of
    one object are the same object."""
    return text_digest(f"{path.bucket}\0{path.key}\0{detail}")
