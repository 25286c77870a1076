"""Aborting a failed or killed try's job from the Airflow worker, once its Spark processes are gone.

The try (:class:`~airflow_commit_provider.operators.committed_try.CommittedTry`) stops its
spark-submit, then calls :func:`abort_try_job`. The abort itself is the core's
(:func:`~airflow_commit_provider.core.job_control.abort_job`,
:func:`~airflow_commit_provider.tries.hadoop_jobs.abort_hadoop_job`); this says in the task log what
became of the job. An abort never raises: what it leaves, the cleanup operators reclaim.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from airflow_commit_provider.core.job_control import abort_job
from airflow_commit_provider.tries.hadoop_jobs import abort_hadoop_job

if TYPE_CHECKING:
    from airflow_commit_provider.core.committers.registry import WritePlan
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store
    from airflow_commit_provider.operators.try_outcome import TaskLog

__all__ = ["STOP_WAIT_SECONDS", "abort_try_job"]

_WHY = "the Airflow try failed or was killed"
#: How long to wait for the processes of a stopped job to exit before aborting anyway.
STOP_WAIT_SECONDS = 30.0


def abort_try_job(
    open_store: Callable[[], AbstractContextManager[Store]],
    plan: WritePlan,
    job_id: str,
    reason: str,
    adopt_committed_tries: bool,
    log: TaskLog,
) -> SuccessData | None:
    """Abort the try's job; the job's `SuccessData` if it had passed its commit point (then committed)."""
    log.warning("Aborting job %s (%s)", job_id, reason)
    try:
        with open_store() as store:
            if plan.engine == "hadoop":
                log.info("%s", abort_hadoop_job(store, plan.destination.root, job_id).describe())
                committed = None
            else:
                committed = abort_job(store, plan.destination.root, job_id, plan.committer, _WHY)
    except Exception:
        log.exception(
            "aborting job %s failed; CleanupTemporaryOperator and AbortMultipartUploadsOperator "
            "reclaim what is left",
            job_id,
        )
        return None
    if committed is None:
        log.info("Job %s aborted: its pending uploads and temporary files are gone", job_id)
    else:
        _log_committed_despite_failure(committed, plan.destination.uri, adopt_committed_tries, log)
    return committed


def _log_committed_despite_failure(
    data: SuccessData, destination: str, adopt_committed_tries: bool, log: TaskLog
) -> None:
    """The job had passed its commit point: abort finished it, so its output is committed."""
    if adopt_committed_tries:
        after = f"the next try of this task adopts job {data.job_id} instead of writing again"
    else:
        after = (
            "the next try writes again (adopt_committed_tries=False): only conflict_mode='replace' "
            "keeps that to one copy"
        )
    log.warning(
        "Job %s had already reached its commit point, so it could not be aborted: it is COMMITTED "
        "(%s files, %s bytes in %s). This try fails all the same; %s.",
        *(data.job_id, data.file_count, data.total_bytes, destination, after),
    )
