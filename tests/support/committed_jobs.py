"""Jobs run by real committers to a shared destination, for the tests of records and markers.

Each leaves what the committer leaves: output, `_SUCCESS` (and per-partition ones for the
`partitioned` committer), and the job's outcome and record under `_airflow_commit/`.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from support.faults import FaultInjectingStore, SimulatedCrash, StoreCall

COMMITTER = "partitioned"


def commit(
    store: Store, dest: StorePath, job_id: str, partitions: Sequence[str] = ("dt=1",), files: int = 1
) -> SuccessData:
    """A committed job writing `files` files into each of `partitions`, one task per partition."""
    job = create_committer(COMMITTER, store, dest, job_id, CommitOptions(threads=2))
    job.setup_job()
    results = []
    for task, partition in enumerate(partitions):
        attempt = job.task_attempt(task, 0)
        for index in range(files):
            with attempt.create_file(f"{partition}/part-{index:03d}-{job_id}.csv") as stream:
                stream.write(f"a,b\n{task},{index}\n".encode())
        results.append(attempt.commit_task(rows=files))
    return job.commit_job(results)


def set_up(store: Store, dest: StorePath, job_id: str) -> None:
    """A job that has started (job setup removes the destination's `_SUCCESS`) but not committed."""
    create_committer(COMMITTER, store, dest, job_id, CommitOptions(threads=2)).setup_job()


def abort(store: Store, dest: StorePath, job_id: str) -> None:
    job = create_committer(COMMITTER, store, dest, job_id, CommitOptions(threads=2))
    job.setup_job()
    assert job.abort_job() is None


def interrupt_after_commit_point(store: Store, dest: StorePath, job_id: str) -> None:
    """A job whose driver died just after its commit point: COMMITTING, its upload still pending.

    The driver dies at its first step past the decision (completing the task's upload), so the
    job has an outcome saying commit, no record, a pending upload and its temporary tree.
    """
    faulty = FaultInjectingStore(store)
    job = create_committer(COMMITTER, faulty, dest, job_id, CommitOptions(threads=1))
    job.setup_job()
    attempt = job.task_attempt(0, 0)
    with attempt.create_file(f"dt=9/part-{job_id}.csv") as stream:
        stream.write(b"x")
    result = attempt.commit_task(rows=1)
    outcome = str(JobLayout(dest, job_id).outcome)
    decided = False

    def past_the_decision(call: StoreCall) -> bool:
        nonlocal decided
        if call.mutating and call.path == outcome:
            decided = True
            return False
        return decided and call.mutating

    faulty.inject(when=past_the_decision, mode="crash")
    try:
        job.commit_job([result])
    except SimulatedCrash:
        pass
    else:
        raise AssertionError("the commit was meant to die just after its commit point")
    assert inspect_job(store, dest, job_id).state == JobState.COMMITTING
    assert any(job_id in u.path.key for u in store.list_multipart_uploads(dest)), "its upload is pending"
