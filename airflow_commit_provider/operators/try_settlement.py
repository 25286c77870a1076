"""How a try settles the jobs of the tries before it (engine="python"), and says what each became.

The decisions are the core's (:func:`~airflow_commit_provider.tries.plan.plan_try`): a job that
committed while its try failed is adopted (this try runs no Spark job), a delivered one is left (a
re-run writes again), any other is fenced so it can never commit. This module feeds it what the
operator knows and turns its answer into the task's errors and log lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.core.job_control import JobState
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.tries.plan import TriedJob, TryPlan, plan_try

if TYPE_CHECKING:
    from airflow_commit_provider.core.committers.registry import WritePlan
    from airflow_commit_provider.core.store import Store
    from airflow_commit_provider.core.task_key import TaskKey
    from airflow_commit_provider.operators.try_outcome import TaskLog

__all__ = ["log_adoption", "log_settled_tries", "settle_earlier_tries"]


def settle_earlier_tries(
    store: Store,
    plan: WritePlan,
    key: TaskKey | None,
    number: int | None,
    *,
    adopt_committed_tries: bool,
    log: TaskLog,
) -> TryPlan:
    """Adopt, leave or fence the jobs of the running try's predecessors; log what each one became.

    A job rolled forward or fenced gets the plan's conflict mode (``append`` unless asked otherwise,
    the committers' default).
    """
    if key is None or number is None:
        raise AirflowException(
            "engine='python' names each try's job after the task instance (dag_id, task_id, run_id, "
            "map_index, try_number), and the context has none"
        )
    tries = plan_try(
        store,
        plan.destination.root,
        key,
        number,
        plan.committer,
        adopt_committed=adopt_committed_tries,
        options=CommitOptions(conflict_mode=plan.conflict_mode),
    )
    log_settled_tries(tries, adopt_committed_tries, log)
    return tries


def log_adoption(job: TriedJob, log: TaskLog) -> None:
    log.info(
        "Adopting job %s committed by try %d (its try did not succeed): running no Spark job, "
        "returning that job's result",
        job.job_id,
        job.try_number,
    )


def log_settled_tries(plan: TryPlan, adopt_committed_tries: bool, log: TaskLog) -> None:
    """Say what each job of an earlier try became: left (delivered), fenced, or not adopted."""
    for job in plan.delivered:
        log.info(
            "Job %s of try %d was delivered (that try succeeded): this try is a re-run and writes again",
            job.job_id,
            job.try_number,
        )
    for job in plan.fenced:
        if job.found is JobState.ACTIVE:
            log.warning(
                "Fenced job %s of try %d, which was still active (its driver may be alive): it can never "
                "commit now, and its pending uploads and temporary files are gone",
                job.job_id,
                job.try_number,
            )
        elif job.found is JobState.UNKNOWN:
            log.info(
                "Fenced job ID %s of try %d: it never started, and now never can", job.job_id, job.try_number
            )
        else:
            log.info(
                "Job %s of try %d was aborted already; its leftovers are gone", job.job_id, job.try_number
            )
    for job in plan.not_adopted:
        log.warning(
            "Job %s of try %d committed but its try did not succeed; not adopting it (%s): its output "
            "stays, and this try writes again",
            job.job_id,
            job.try_number,
            "adopt_committed_tries=False" if not adopt_committed_tries else "a later job is adopted",
        )
