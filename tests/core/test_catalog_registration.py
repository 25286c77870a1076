"""The catalog side of the commit (core.catalog): the table is fixed in the commit decision, so a
process that rolls a dead driver's commit forward knows it without being told, and registering a
job's partitions is recorded in its job record once, whoever finishes it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from support.faults import FaultInjectingStore
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.workload import JobRun

from airflow_commit_provider.core.catalog import Partition, TableInfo, register_committed
from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.job_control import JobState, finish_or_fence, inspect_job
from airflow_commit_provider.core.job_records import load_job_record


class ListCatalog:
    """A catalog kept in a dict: what a real one would hold after each request."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[tuple[str, str | None], ...], str] = {}
        self.requests = 0

    def table_info(self, name: str) -> TableInfo:
        raise AssertionError("registration needs no table description")

    def register_partitions(self, name: str, partitions: Sequence[Partition]) -> None:
        self.requests += 1
        for partition in partitions:
            self.partitions[partition.values] = str(partition.location)


def _values(path: str) -> tuple[tuple[str, str | None], ...]:
    column, _, value = path.partition("=")
    return ((column, value),)


def test_a_dead_drivers_table_is_known_to_whoever_rolls_its_commit_forward(commit_env: CommitEnv) -> None:
    env = commit_env
    job = JobRun.create("partitioned", env.store, env.dest, env.options(table="db.events"))
    job.committer.setup_job()
    results = [job.run_task(task, 0, [f"dt={task}/part-{task}.bin"]).result for task in range(2)]
    dying = FaultInjectingStore(env.store)
    dying.inject(when=lambda call: call.path.endswith("_SUCCESS") and call.mutating, mode="crash")
    with pytest.raises(BaseException, match="died"):
        options = env.options(table="db.events")
        create_committer("partitioned", dying, env.dest, job.job_id, options).commit_job(
            [r for r in results if r is not None]
        )
    assert inspect_job(env.store, env.dest, job.job_id).state == JobState.COMMITTING

    status = finish_or_fence(env.store, env.dest, job.job_id, "partitioned")  # knows no table
    assert status.record is not None
    assert (status.record.table, status.record.registration_pending) == ("db.events", True)

    catalog = ListCatalog()
    registered = register_committed(catalog, env.store, env.dest, status.record, _values)
    assert registered.registered_partitions == ["dt=0", "dt=1"]
    assert catalog.partitions == {
        (("dt", "0"),): str(env.dest.join("dt=0")),
        (("dt", "1"),): str(env.dest.join("dt=1")),
    }
    stored = load_job_record(env.store, env.dest, job.job_id)
    assert (stored.table, stored.registered_partitions) == ("db.events", ["dt=0", "dt=1"])
    register_committed(catalog, env.store, env.dest, stored, _values)
    assert catalog.requests == 1, "a registered job is not registered again"


def test_a_path_write_registers_nothing(commit_env: CommitEnv) -> None:
    env = commit_env
    job = JobRun.create("partitioned", env.store, env.dest, env.options())
    job.committer.setup_job()
    result = job.run_task(0, 0, ["dt=0/part-0.bin"]).result
    record = job.committer.commit_job([result] if result is not None else [])
    assert record.table is None and not record.registration_pending
    catalog = ListCatalog()
    assert register_committed(catalog, env.store, env.dest, record, _values) is record
    assert catalog.requests == 0
