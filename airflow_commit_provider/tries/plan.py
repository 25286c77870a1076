"""Which job an orchestrator's task try runs, and what becomes of the jobs its earlier tries ran.

Exactly once across tries needs, with no database but the store: every try can name the jobs of
the tries before it, and a job that committed while its try died is adopted rather than written
again, while a job that did not commit is fenced so that it never can.

**Job IDs.** A task instance (:class:`TaskKey`: DAG, task, run, map index) and a try number name a
sequence of job IDs, ``try_job_id(key, n, 0)``, ``try_job_id(key, n, 1)``, ... (UUIDv5s, so any
process computes the same ones). A try runs under the first ID of its sequence that the store
knows nothing of (``UNKNOWN``). That is the first one, unless the same try number ran before and
left a job: a DAG run deleted and re-created under the same run ID (try numbers restart), or a try
executed twice.

**Earlier tries.** :func:`plan_try` walks the sequence of every earlier try number up to its first
unknown ID, and the known IDs of the try's own sequence, and settles every job it finds:

======================================  =====================================================
found                                   what happens
======================================  =====================================================
delivered (its try succeeded)           left alone; this try is a deliberate re-run (a clear)
COMMITTED or COMMITTING, not delivered  finished (a COMMITTING job is rolled forward); the
                                        latest is adopted, unless adoption is off
ACTIVE or ABORTED                       fenced: outcome *abort*, uploads and temp trees removed
an earlier try's first unknown ID       fenced too: that try may have died before its Spark
                                        job set up, and the job must never start later
======================================  =====================================================

A fenced job that comes back (an orphaned driver) is refused by the committer and removes what it
wrote. Fencing an earlier try's first unknown ID lengthens that try's sequence by one, which the
next walk steps over: try ``n`` reads at most about ``n²/2`` job states and writes at most
``n - 1`` outcomes for jobs that never ran, a handful for the usual few retries.

Adoption is per destination: one job, one destination. An application that writes several
outputs in one try must not rely on it (see the operator's ``adopt_committed_tries``).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_commit_provider.core.job_control import JobState, JobStatus, finish_or_fence, inspect_job
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.task_key import TaskKey, TryOrigin

__all__ = ["TRY_JOB_NAMESPACE", "TriedJob", "TryPlan", "find_tried_jobs", "plan_try", "try_job_id"]

TRY_JOB_NAMESPACE = uuid.UUID("6f1c8f3e-5a0b-4d63-9a57-2f0a6c1d9b21")
"""The UUIDv5 namespace of try job IDs. Never change it: retries would no longer find the jobs of
tries that ran before the change."""


def try_job_id(key: TaskKey, try_number: int, generation: int = 0) -> str:
    """The job ID at position `generation` of the sequence of try `try_number` (see the module doc)."""
    if try_number < 1 or generation < 0:
        raise ValueError(f"try number {try_number} / generation {generation}: expected >= 1 / >= 0")
    name = f"{key.dag_id}/{key.task_id}/{key.run_id}/{key.map_index}/{try_number}"
    if generation:
        name += f"#{generation}"
    # uuid5 encodes strictly; a lone surrogate (a run ID from JSON's "\udc80") would fail it.
    # Escaping changes no other name's ID.
    return str(uuid.uuid5(TRY_JOB_NAMESPACE, name.encode("utf-8", "backslashreplace").decode("utf-8")))


@dataclass(frozen=True)
class TriedJob:
    """A job one try ran (or may have been about to run), and its state."""

    try_number: int
    generation: int
    status: JobStatus
    found: JobState
    """The state the walk found it in, before it was settled (UNKNOWN: the job never started)."""

    @property
    def job_id(self) -> str:
        return self.status.job_id


@dataclass(frozen=True)
class TryPlan:
    """What a try found and did before running: the job to run, or the one to adopt instead."""

    job_id: str
    """The job this try runs when it adopts nothing."""
    adopted: TriedJob | None
    """A committed, undelivered job of an earlier try: the try returns its result and runs nothing."""
    fenced: tuple[TriedJob, ...]
    """Jobs that had not committed: now aborted for good, their leftovers removed."""
    delivered: tuple[TriedJob, ...]
    """Jobs whose try succeeded: left alone; they do not stop a re-run."""
    not_adopted: tuple[TriedJob, ...]
    """Committed, undelivered jobs not adopted (adoption off, or an older one than `adopted`)."""


def find_tried_jobs(
    store: Store, destination: str | StorePath, key: TaskKey, try_number: int
) -> tuple[list[TriedJob], str]:
    """Every job the tries before `try_number` (and earlier runs of this try) may have run.

    Returns the jobs in try order, each earlier try's first unknown ID included, and the job ID
    this try should run under. Reads only.
    """
    if try_number < 1:
        raise ValueError(f"try number {try_number} is not a try (expected >= 1)")
    found: list[TriedJob] = []
    for number in range(1, try_number + 1):
        generation = 0
        status = inspect_job(store, destination, try_job_id(key, number, generation))
        while status.state is not JobState.UNKNOWN:
            found.append(TriedJob(number, generation, status, status.state))
            generation += 1
            status = inspect_job(store, destination, try_job_id(key, number, generation))
        if number < try_number:  # that try may yet start this job: it is fenced with the others
            found.append(TriedJob(number, generation, status, status.state))
    return found, status.job_id


def settle_tried_jobs(
    store: Store,
    destination: str | StorePath,
    jobs: Sequence[TriedJob],
    committer: str,
    *,
    adopt_committed: bool = True,
    options: CommitOptions | None = None,
    key: TaskKey | None = None,
) -> tuple[TriedJob | None, list[TriedJob], list[TriedJob], list[TriedJob]]:
    """Finish or fence every undelivered job; pick the latest committed one to adopt.

    Returns (adopted, fenced, delivered, not adopted). `committer` (and `options`, for rolling a
    ``replace`` commit forward) apply to jobs whose outcome does not name a committer. With the task
    instance's `key`, a fenced job's decision records the try it belonged to (for the commit report).
    """
    fenced: list[TriedJob] = []
    delivered: list[TriedJob] = []
    committed: list[TriedJob] = []
    for job in jobs:
        if job.status.delivered:
            delivered.append(job)
            continue
        reason = f"fenced by a later try of the same task (this job is try {job.try_number}'s)"
        settled = TriedJob(
            job.try_number,
            job.generation,
            finish_or_fence(
                store, destination, job.job_id, committer, _of_try(options, key, job), reason=reason
            ),
            job.found,
        )
        (committed if settled.status.state is JobState.COMMITTED else fenced).append(settled)
    adopted = (
        max(committed, key=lambda j: (j.try_number, j.generation)) if adopt_committed and committed else None
    )
    return adopted, fenced, delivered, [job for job in committed if job is not adopted]


def plan_try(
    store: Store,
    destination: str | StorePath,
    key: TaskKey,
    try_number: int,
    committer: str,
    *,
    adopt_committed: bool = True,
    options: CommitOptions | None = None,
) -> TryPlan:
    """Settle the jobs of earlier tries (see the module doc) and say what this try does."""
    jobs, job_id = find_tried_jobs(store, destination, key, try_number)
    adopted, fenced, delivered, not_adopted = settle_tried_jobs(
        store, destination, jobs, committer, adopt_committed=adopt_committed, options=options, key=key
    )
    return TryPlan(job_id, adopted, tuple(fenced), tuple(delivered), tuple(not_adopted))


def _of_try(options: CommitOptions | None, key: TaskKey | None, job: TriedJob) -> CommitOptions | None:
    """`options` naming the try that ran `job` as the origin of what settling it decides."""
    if key is None:
        return options
    return dataclasses.replace(options or CommitOptions(), origin=TryOrigin(key, job.try_number))
