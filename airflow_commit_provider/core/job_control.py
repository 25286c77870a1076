"""Looking at a job from outside its driver, and settling it: what an Airflow retry, the CLI or
an operator's kill path needs, given only the destination and the job ID.

The states are those of `stages.job_state`; this module only reads them and moves a job to an
end state: a job past its commit point is finished, any other is fenced.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import job_state, success
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.job_state import JobState
from airflow_commit_provider.core.stages.uploads import abort_hadoop_magic_uploads
from airflow_commit_provider.core.store.base import Store, StoreError

__all__ = ["JobState", "JobStatus", "abort_job", "finish_or_fence", "inspect_job", "mark_delivered"]


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: JobState
    committer: str | None = None
    """The committer named by the job's outcome, when it has one."""
    record: SuccessData | None = None
    """The job record, once the job is COMMITTED."""
    delivered: bool = False
    """Whether the orchestrator marked the try that ran the job as succeeded."""
    outcome: JobOutcome | None = None
    """The job's decision, once it has one."""

    @property
    def committed(self) -> bool:
        """Committed or past its commit point: its output is (or will be made) visible."""
        return self.state in (JobState.COMMITTING, JobState.COMMITTED)


def inspect_job(store: Store, destination: str | StorePath, job_id: str) -> JobStatus:
    """The job's state as the store shows it; reads only, changes nothing."""
    ctx = _context(store, destination, job_id, committer="")
    outcome = job_state.read_outcome(ctx)
    record = success.read_job_record(ctx) if outcome is not None and outcome.committing else None
    delivered = store.get_status(ctx.layout.delivery_marker) is not None
    if outcome is None:
        active = any(store.get_status(layout.job_marker) is not None for layout in _layouts(ctx.layout))
        state = JobState.ACTIVE if active else JobState.UNKNOWN
    elif not outcome.committing:
        state = JobState.ABORTED
    else:
        state = JobState.COMMITTED if record is not None else JobState.COMMITTING
    return JobStatus(job_id, state, outcome.committer if outcome else None, record, delivered, outcome)


def finish_or_fence(
    store: Store,
    destination: str | StorePath,
    job_id: str,
    committer: str,
    options: CommitOptions | None = None,
    reason: str = "fenced",
) -> JobStatus:
    """Bring the job to an end state: finish it if it passed its commit point, else fence it.

    A fenced job can never set up, commit a task or commit: an orphaned driver that comes back
    later aborts itself. `committer` is used only when the job has no outcome naming its own.
    """
    ctx = _context(store, destination, job_id, committer="")
    outcome = job_state.read_outcome(ctx)
    name = outcome.committer if outcome is not None and outcome.committer else committer
    record = create_committer(name, store, destination, job_id, options).abort_job(reason)
    delivered = store.get_status(ctx.layout.delivery_marker) is not None
    if record is None:
        return JobStatus(job_id, JobState.ABORTED, name, None, delivered)
    log.info("job %s had reached its commit point: it is now committed", job_id)
    return JobStatus(job_id, JobState.COMMITTED, name, record, delivered)


def abort_job(
    store: Store, destination: str | StorePath, job_id: str, committer: str, reason: str
) -> SuccessData | None:
    """Abort a job from outside its driver (a failed or killed try): its uploads and temp trees go.

    The committer finds exactly this job's uploads from their records. Returns the job's
    SuccessData when it had passed its commit point, so the abort finished the commit instead.
    A committer the store cannot host never ran: only the job's directories are deleted.
    A job of Hadoop's S3A magic committer (a killed JVM job) is settled too: the uploads its
    ``.pending``/``.pendingset`` files list are aborted before its directory is deleted with them.
    """
    abort_hadoop_magic_uploads(store, destination, job_id)
    try:
        job = create_committer(committer, store, destination, job_id)
    except (ValueError, StoreError):
        layout = JobLayout(StorePath.parse(destination), validate_job_id(job_id))
        for either in _layouts(layout):
            store.delete_tree(either.job_dir)
        return None
    return job.abort_job(reason)


def mark_delivered(store: Store, destination: str | StorePath, job_id: str) -> None:
    """Record that the try which ran this job succeeded, so a later try (a clear) runs anew."""
    layout = JobLayout(StorePath.parse(destination), job_id)
    store.write_bytes(layout.delivery_marker, b'{"delivered": true}')


def _context(store: Store, destination: str | StorePath, job_id: str, committer: str) -> JobContext:
    layout = JobLayout(StorePath.parse(destination), job_id)
    return JobContext(store, layout, committer, CommitOptions())


def _layouts(layout: JobLayout) -> tuple[JobLayout, JobLayout]:
    """Before its outcome names the committer, a job may use either layout."""
    return (layout, JobLayout(layout.destination, layout.job_id, magic=not layout.magic))
