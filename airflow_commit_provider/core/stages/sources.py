"""Checking, before the commit point, that what job commit is about to commit is there.

A manifest is its task's word, but a damaged or forged one can name a source in the job's own
directory that does not exist, has another size, or is named twice, or an upload that is not
pending (another upload ID, or another key). Committing would then fail after the commit point,
and the job could neither commit nor abort. Hadoop's manifest committer validates renamed files
only afterwards, and only on request (one getFileStatus per file); here the check refuses the job
before it is decided, from one listing (of the job directory, or of the destination's pending
uploads) rather than one request per file, merged with the sorted entries: memory holds no set per
file. An upload's parts (ETags, length) are not listed: that would cost a request each.
"""

from __future__ import annotations

from collections.abc import Iterator

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import grouped, join_sorted, key_order, spooled
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError


def check_sources_exist(ctx: JobContext, spool: EntrySpool) -> None:
    """Refuse the job, naming the manifest, if an entry's source file or upload is not listed.

    Sources outside the job's directory (file-v2's, already in place at their destination) are
    checked where they are committed. Each listed item answers for one entry only: a source named
    twice is refused (an upload cannot be: its key is its entry's destination, and no two entries
    share one).
    """
    if spool.uploads:
        _check_uploads(ctx, spool)
    if spool.count == spool.uploads:
        return
    job_dir = ctx.layout.job_dir
    with spooled(
        (
            (key_order(source.key), source.key, entry.size, entry.task_id, entry.source)
            for entry in spool
            if entry.source is not None and entry.upload_id is None
            for source in (
                StorePath.from_uri(entry.source),
            )  # parsed once already, when its manifest was loaded
            if source.is_under(job_dir)
        ),
        prefix="commit-sources-",
    ) as sources:
        if sources.count == 0:
            return
        with spooled(
            ((key_order(status.path.key), status.size) for status in ctx.store.list_files(job_dir)),
            prefix="commit-listing-",
        ) as listed:
            last_source = None
            for source, found in join_sorted(sources, listed):
                if source is None:
                    continue
                _key, _path, size, task_id, uri = source
                if found is None or found[1] != size or uri == last_source:
                    raise InvalidCommitDataError(
                        f"{ctx.layout.manifest_path(task_id)}: source {uri} of {size} bytes is not in the "
                        f"job's directory {job_dir} (missing, of another size, or named twice)"
                    )
                last_source = uri


def _check_uploads(ctx: JobContext, spool: EntrySpool) -> None:
    root = ctx.layout.destination
    with spooled(
        (
            (key_order(upload.path.relative_to(root)), upload.upload_id)
            for upload in ctx.operations.list_pending(root)
        ),
        prefix="commit-uploads-",
    ) as pending:
        for uploading, listed in join_sorted(_uploading(spool), grouped(pending)):
            if uploading is None:
                continue
            entry = uploading[1]
            if listed is None or entry.upload_id not in {upload for _key, upload in listed[1]}:
                raise InvalidCommitDataError(
                    f"{ctx.layout.manifest_path(entry.task_id)}: upload {entry.upload_id!r} of {entry.dest} is "
                    f"not pending under {root} (missing, or of another key)"
                )


def _uploading(spool: EntrySpool) -> Iterator[tuple[bytes, CommitEntry]]:
    return ((key, entry) for key, entry in spool.keyed() if entry.upload_id is not None)
