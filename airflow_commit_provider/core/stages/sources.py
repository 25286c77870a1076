"""Checking, before the commit point, that every file job commit is about to rename is there.

A manifest is its task's word, but a damaged or forged one can name a source in the job's own
directory that does not exist, has another size, or is named twice. The rename would then fail
after the commit point, and the job could neither commit nor abort. Hadoop's manifest committer
validates renamed files only afterwards, and only on request (one getFileStatus per file); here the
check refuses the job before it is decided, from one listing of the job directory rather than one
HEAD per file, holding one 8-byte digest per listed file as the spool does per entry.
"""

from __future__ import annotations

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext
from airflow_commit_provider.core.stages.entries import EntrySpool, text_digest
from airflow_commit_provider.core.stages.errors import InvalidCommitDataError


def check_sources_exist(ctx: JobContext, spool: EntrySpool) -> None:
    """Refuse the job, naming the manifest, if a source in the job's directory is not there as listed.

    Sources outside it (file-v2's, already in place at their destination) are checked where they
    are committed. Each listed file answers for one entry only: a source named twice is refused.
    """
    job_dir = ctx.layout.job_dir
    listed: set[int] | None = None
    for entry in spool:
        if entry.source is None:
            continue
        source = StorePath.from_uri(entry.source)  # parsed once already, when the manifest was loaded
        if not source.is_under(job_dir):
            continue
        if listed is None:
            listed = {_file_digest(status.path, status.size) for status in ctx.store.list_files(job_dir)}
        digest = _file_digest(source, entry.size)
        if digest not in listed:
            raise InvalidCommitDataError(
                f"{ctx.layout.manifest_path(entry.task_id)}: source {entry.source} of {entry.size} bytes "
                f"is not in the job's directory {job_dir} (missing, of another size, or named twice)"
            )
        listed.remove(digest)


def _file_digest(path: StorePath, size: int) -> int:
    """One file by bucket, key and size: `s3` and `s3a` URIs of one object are the same file."""
    return text_digest(f"{path.bucket}\0{path.key}\0{size}")
