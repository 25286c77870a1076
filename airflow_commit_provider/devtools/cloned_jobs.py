"""Many jobs' records without running many commits, a development tool for the tests and the
benchmarks of what grows with the number of jobs (the records index, the list of commits, prune).

`clone_jobs` copies one job that really committed: its outcome and record, with its job ID
replaced (in the attempt IDs too) and its decision time set, so every reader reads what the
committers write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.parallel import parallel_map
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.records_index import write_entry
from airflow_commit_provider.core.store.base import Store

__all__ = ["clone_jobs"]


def clone_jobs(
    store: Store,
    destination: StorePath,
    template: str,
    decided_at: Mapping[str, int],
    *,
    indexed: bool = True,
    threads: int = 16,
) -> None:
    """Give each job ID of `decided_at` the outcome and record of the committed job `template`
    under `destination`, decided at the given epoch ms, and, if `indexed`, its records index entry
    as its driver writes it (else it is a job from before the index). Two or three PUTs a job."""
    layout = JobLayout(destination, template)
    outcome_text = store.read_bytes(layout.outcome).decode("utf-8")
    record_text = store.read_bytes(layout.job_record).decode("utf-8")

    def clone(job_id: str) -> None:
        target = JobLayout(destination, job_id)
        outcome = json.loads(outcome_text.replace(template, job_id))
        outcome["timestamp"] = decided_at[job_id]
        data = json.dumps(outcome).encode("utf-8")
        store.write_bytes(target.outcome, data, if_absent=True)
        store.write_bytes(target.job_record, record_text.replace(template, job_id).encode("utf-8"))
        if indexed:
            write_entry(store, target, JobOutcome.from_bytes(data, str(target.outcome), job_id))

    parallel_map(list(decided_at), clone, threads)
