"""Aborting a failed or killed try's job from the Airflow worker, once its Spark processes are gone.

:class:`AbortingTry` is the operator's part that stops a try (its ``on_kill``, and ``execute``'s
failure path): kept apart so the operator module holds the try's course. The abort itself is
the core's (:func:`~airflow_commit_provider.core.job_control.abort_job`,
:func:`~airflow_commit_provider.core.hadoop_jobs.abort_hadoop_job`); this says in the task log what
became of the job. An abort never raises: what it leaves, the cleanup operators reclaim.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.hadoop_jobs import abort_hadoop_job
from airflow_commit_provider.core.job_control import abort_job

if TYPE_CHECKING:
    from airflow.sdk.types import Logger

    from airflow_commit_provider.core.committers.registry import WritePlan
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store
    from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
    from airflow_commit_provider.operators.try_outcome import TaskLog

__all__ = ["STOP_WAIT_SECONDS", "AbortingTry", "abort_try_job"]

_WHY = "the Airflow try failed or was killed"
#: How long to wait for the processes of a stopped job to exit before aborting anyway.
STOP_WAIT_SECONDS = 30.0


class AbortingTry:
    """Stopping the running try: its spark-submit process group killed, then its job aborted once.

    The state is the operator's (set per execution in ``execute``); ``on_kill`` may run in the
    SIGTERM handler, during ``execute``, hence the re-entrant lock and the flags.
    """

    _hook: CommittedSparkSubmitHook | None
    _job_id: str | None
    _plan: WritePlan | None
    _killed: bool
    _aborted: bool
    _abort_lock: threading.RLock | None
    _written: dict[str, Any] | None
    adopt_committed_tries: bool
    if TYPE_CHECKING:
        log: Logger

        def _destination_store(self) -> AbstractContextManager[Store]: ...

    def on_kill(self) -> None:
        """Stop spark-submit and its children, abort this try's job; ``execute`` then fails.

        Airflow 3's SIGTERM handler returns after calling this, so the flag makes ``execute`` raise
        even if spark-submit happened to exit cleanly at that moment.
        """
        self._killed = True
        if self._aborted:  # e.g. after execution_timeout: execute has stopped and aborted already
            self.log.info("Killed: job %s was already stopped and aborted", self._job_id)
            return
        self.log.warning("Killed: stopping spark-submit and aborting job %s", self._job_id)
        self._stop_spark()
        if self._job_id:
            self._abort_job("the task was killed")

    def _stop_spark(self) -> None:
        """Kill spark-submit and everything it started (its process group); wait until they are gone."""
        if self._hook is not None and not self._hook.kill_process_group(STOP_WAIT_SECONDS):
            self.log.warning("processes of job %s are still alive after SIGKILL", self._job_id)

    def _abort_job(self, reason: str) -> None:
        """Abort this try's job once: pending uploads aborted, temporary directory deleted."""
        job_id, plan = self._job_id, self._plan
        if self._abort_lock is None:
            self._abort_lock = threading.RLock()
        with self._abort_lock:
            if self._aborted or not job_id or plan is None:
                return
            self._aborted = True
            committed = abort_try_job(
                self._destination_store, plan, job_id, reason, self.adopt_committed_tries, self.log
            )
            if committed is not None:  # for OpenLineage: the try fails, but its output is committed
                self._written = {**committed.summary(), "partitions": committed.partitions or []}


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
                log.info("%s", abort_hadoop_job(store, plan.destination, job_id).describe())
                committed = None
            else:
                committed = abort_job(store, plan.location, job_id, plan.committer, _WHY)
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
        _log_committed_despite_failure(committed, plan.destination, adopt_committed_tries, log)
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
