"""The life of a job, in one place: its states, the one decision, and who may move it on.

A job's state is what the store holds for it, so any process (the driver, a resumed driver, an
Airflow retry, the cleanup CLI) reads the same answer:

==========  =================================================  ==================================
state       what the store holds                                reached by
==========  =================================================  ==================================
UNKNOWN     nothing (never set up, or its records pruned)
ACTIVE      the job marker, no outcome                          ``setup_job``
COMMITTING  an outcome saying *commit*, with the task list      the commit point in ``commit_job``
COMMITTED   that outcome and the job record                     rolling the commit forward
ABORTED     an outcome saying *abort*                           ``abort_job``, or a fence
==========  =================================================  ==================================

Transitions::

    UNKNOWN --setup_job--> ACTIVE --commit point--> COMMITTING --roll forward--> COMMITTED
       |                     |                          ^   |
       +------abort----------+--> ABORTED               |   +-- abort / resume / a second
                                    |                   |       committer: roll forward
                                    +-- commit_job, setup_job, task commit: refused

The outcome file is created once, if absent (``If-None-Match: *`` on S3, ``O_EXCL`` locally), so
a commit and an abort racing from different processes cannot both win: the loser reads the
winner's decision and follows it. The commit point comes after everything that can refuse the
job (every manifest loaded and checked, every source or upload found in a listing, the ``fail``
conflict check); after it only retryable store errors interrupt the commit, and every step of
rolling forward is idempotent.

An outcome file that cannot be this job's decision (damaged or forged) is refused by all, naming
it; only abort may replace it, and only while nothing of the job can be visible
(``overrule_unreadable_outcome``). Otherwise it needs a person.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum

from airflow_commit_provider.core import records_index
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import now_millis, read_json_bytes
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.errors import JobFencedError, JobNotActiveError
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    FileNotFoundInStoreError,
    StoreError,
)
from airflow_commit_provider.core.store.check import require_conditional_create, require_uploads_outlive_job

#: The job marker's field holding the job's `CommitOptions.max_job_duration`, when it is known.
MAX_JOB_SECONDS = "maxJobSeconds"


class JobState(str, Enum):
    UNKNOWN = "unknown"
    ACTIVE = "active"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTED = "aborted"


def setup_job(ctx: JobContext, required_capabilities: tuple[str, ...], *, uploads: bool = False) -> None:
    """Refuse an unsuitable store or a decided job, remove a previous `_SUCCESS`, mark the job active.

    Every committer's commit point is the outcome file created if absent, and most also commit
    tasks that way, so a store that does not enforce create-if-absent is refused here, before any
    work (probed in the job's own directory, once per endpoint and bucket per process). A committer
    that keeps its files as pending `uploads` until job commit is refused a bucket whose lifecycle
    rules could abort them before the job's `max_job_duration` is over (read once per job). The job
    marker records that duration, so upload cleanup knows how long the job can still be live.
    """
    purpose = f"the {ctx.committer} committer"
    for capability in required_capabilities:
        ctx.store.require(capability, purpose)
    if uploads:
        require_uploads_outlive_job(ctx.store, ctx.layout.destination, ctx.options.max_job_duration, purpose)
    require_conditional_create(ctx.store, ctx.layout.job_dir, purpose)
    outcome = read_outcome(ctx)
    if outcome is not None:
        raise JobFencedError(
            f"job {ctx.job_id} at {ctx.layout.destination} was already decided ({outcome.decision}, "
            f"{ctx.layout.outcome}): it cannot be set up again"
        )
    if ctx.store.get_status(ctx.layout.success_marker) is not None:
        log.info("job %s: removing the previous %s", ctx.job_id, ctx.layout.success_marker)
        ctx.store.delete(ctx.layout.success_marker)
    ctx.store.prepare_directory(ctx.layout.job_attempt_dir)
    marker: dict[str, object] = {"jobId": ctx.job_id, "committer": ctx.committer, "created": now_millis()}
    if ctx.options.max_job_duration is not None:
        marker[MAX_JOB_SECONDS] = ctx.options.max_job_duration
    ctx.store.write_bytes(ctx.layout.job_marker, json.dumps(marker).encode("utf-8"))


def read_outcome(ctx: JobContext) -> JobOutcome | None:
    """The job's outcome, or None before it is decided.

    InvalidCommitDataError names the file when it cannot be this job's decision: damaged, of another
    job, or committing tasks that are not this job's or a task twice (rolling such a list forward
    could only fail after the commit point).
    """
    path = ctx.layout.outcome
    try:
        data = read_json_bytes(ctx.store, path)
    except FileNotFoundInStoreError:
        return None
    outcome = JobOutcome.from_bytes(data, str(path), ctx.job_id)
    tasks = set()
    for result in outcome.committed:
        if not ctx.layout.is_attempt_of_this_job(result.task_id, result.task_attempt_id):
            raise InvalidCommitDataError(
                f"{path}: commits task attempt {result.task_attempt_id!r} of task {result.task_id!r}, "
                f"which is not an attempt of job {ctx.job_id}"
            )
        if result.task_id in tasks:
            raise InvalidCommitDataError(f"{path}: commits task {result.task_id} twice")
        tasks.add(result.task_id)
    return outcome


def overrule_unreadable_outcome(
    ctx: JobContext, proposal: JobOutcome, untouched: Callable[[], bool]
) -> JobOutcome:
    """Decide `proposal` (an abort) in place of an outcome file that cannot be read, if that is safe.

    No one can roll such a job forward (its task list is unreadable), so unless it is replaced the
    job stays pending for ever. It is safe while nothing of the job can have become visible: no job
    record, and `untouched()` (every file or upload its tasks committed is still where task commit
    left it). Otherwise the commit may be under way, and the unreadable file needs a person: the
    error reading it is raised again.
    """
    try:
        return decide(ctx, proposal)
    except InvalidCommitDataError:
        if ctx.store.get_status(ctx.layout.job_record) is not None or not untouched():
            raise
    log.warning(
        "job %s: replacing its unreadable outcome %s by: %s",
        ctx.job_id,
        ctx.layout.outcome,
        proposal.decision,
    )
    ctx.store.delete(ctx.layout.outcome)
    return decide(ctx, proposal)


def decide(ctx: JobContext, proposal: JobOutcome) -> JobOutcome:
    """Make `proposal` the job's outcome unless one exists; returns whichever decision stands.

    The standing decision then gets its entry in the records index, if it has none yet (a driver
    that died between its outcome and its entry leaves that to whoever decides next).
    """
    standing = _create_outcome(ctx, proposal)
    _index(ctx, standing)
    return standing


def _create_outcome(ctx: JobContext, proposal: JobOutcome) -> JobOutcome:
    try:
        ctx.store.write_bytes(ctx.layout.outcome, proposal.to_bytes(), if_absent=True)
    except FileAlreadyExistsError:
        standing = read_outcome(ctx)
        if standing is None:  # only pruning deletes an outcome, and never a young one
            raise JobNotActiveError(
                f"job {ctx.job_id}: {ctx.layout.outcome} vanished while deciding"
            ) from None
        if standing.decision != proposal.decision:
            log.info(
                "job %s: wanted to %s, but it was already decided to %s (%s)",
                ctx.job_id,
                proposal.decision,
                standing.decision,
                ctx.layout.outcome,
            )
        return standing
    return proposal


def _index(ctx: JobContext, outcome: JobOutcome) -> None:
    """Write the decision's records index entry. The decision stands without it, so a store error
    here is logged, not raised: the job is then listed from the records folder until an entry is
    written (by the next decision about it, or the next records prune)."""
    try:
        records_index.write_entry(ctx.store, ctx.layout, outcome)
    except StoreError as error:
        log.warning(
            "job %s: its records index entry was not written (%s); `airflow-commit records reindex` writes it",
            ctx.job_id,
            error,
        )


def job_is_active(ctx: JobContext) -> bool:
    return ctx.store.get_status(ctx.layout.job_marker) is not None


def require_active_job(ctx: JobContext, action: str) -> None:
    if not job_is_active(ctx):
        raise JobNotActiveError(
            f"job {ctx.job_id} at {ctx.layout.destination} is not active (never set up, committed or aborted): "
            f"cannot {action}"
        )
