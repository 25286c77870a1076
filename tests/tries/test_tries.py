"""tries.plan: the jobs of earlier tries are adopted, left alone or fenced, on both stores.

Each test leaves the jobs of "earlier tries" in a real state with the real committers (committed,
past the commit point only, set up and dead, never started, delivered), then plans the next try
and checks what it decided and what the store holds afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.faults import FaultInjectingStore, SimulatedCrash, StoreCall
from support.invariants import assert_aborted, assert_committed, assert_nothing_left_behind
from support.workload import JobRun, expected_output, make_options

from airflow_commit_provider.core.job_control import JobState, inspect_job, mark_delivered
from airflow_commit_provider.core.layout import validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import JobFencedError, JobNotActiveError
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.tries.plan import TryPlan, plan_try, try_job_id

KEY = TaskKey("daily_ingest", "write_partition", "scheduled__2024-01-01T00:00:00+00:00", -1)


@pytest.fixture
def target(store_root: tuple[Store, StorePath], tmp_path: Path) -> Iterator[tuple[Store, StorePath, str]]:
    """(store, destination, committer): magic on S3, manifest locally (it needs atomic rename)."""
    store, root = store_root
    committer = "magic" if store.capabilities.multipart_upload else "manifest"
    yield store, root.join("table"), committer


def job(
    target: tuple[Store, StorePath, str], job_id: str, tmp_path: Path, store: Store | None = None
) -> JobRun:
    base, destination, committer = target
    return JobRun.create(
        committer, store or base, destination, make_options(tmp_path / "staging"), job_id=job_id
    )


def plan(target: tuple[Store, StorePath, str], try_number: int, **kwargs: object) -> TryPlan:
    store, destination, committer = target
    return plan_try(store, destination, KEY, try_number, committer, **kwargs)  # type: ignore[arg-type]


def states(plan_: TryPlan) -> dict[str, list[tuple[int, int, str]]]:
    """The plan as (try, generation, state) lists, for readable assertions."""

    def rows(jobs: tuple) -> list[tuple[int, int, str]]:
        return [(j.try_number, j.generation, j.status.state.value) for j in jobs]

    return {
        "fenced": rows(plan_.fenced),
        "delivered": rows(plan_.delivered),
        "not_adopted": rows(plan_.not_adopted),
        "adopted": rows((plan_.adopted,) if plan_.adopted else ()),
    }


# Job IDs ------------------------------------------------------------------------------------------
def test_try_job_ids_are_deterministic_distinct_and_usable_in_paths() -> None:
    ids = {
        try_job_id(KEY, 1),
        try_job_id(KEY, 2),
        try_job_id(KEY, 1, 1),
        try_job_id(TaskKey(KEY.dag_id, KEY.task_id, KEY.run_id, 0), 1),
        try_job_id(TaskKey(KEY.dag_id, KEY.task_id, "manual__other", -1), 1),
        try_job_id(TaskKey(KEY.dag_id, "other_task", KEY.run_id, -1), 1),
        try_job_id(TaskKey("other_dag", KEY.task_id, KEY.run_id, -1), 1),
    }
    assert len(ids) == 7
    assert try_job_id(KEY, 3) == try_job_id(TaskKey(*vars(KEY).values()), 3), "any process computes it"
    for job_id in ids:
        validate_job_id(job_id)
    with pytest.raises(ValueError, match="try number 0"):
        try_job_id(KEY, 0)


def test_first_try_on_an_empty_destination_runs_its_first_job_id(
    target: tuple[Store, StorePath, str],
) -> None:
    store, destination, _ = target
    result = plan(target, 1)
    assert result.job_id == try_job_id(KEY, 1)
    assert states(result) == {"fenced": [], "delivered": [], "not_adopted": [], "adopted": []}
    assert list(store.list_files(destination)) == [], "planning a first try writes nothing"


# Adoption -----------------------------------------------------------------------------------------
def test_a_retry_adopts_the_committed_job_of_a_try_that_died(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    store, destination, _ = target
    first = job(target, try_job_id(KEY, 1), tmp_path)
    first.committer.setup_job()
    attempts = [first.run_task(task) for task in range(2)]
    first.committer.commit_job([a.result for a in attempts])  # then the task process died

    result = plan(target, 2)
    assert states(result)["adopted"] == [(1, 0, "committed")]
    assert result.adopted is not None and result.adopted.job_id == first.job_id
    assert result.adopted.status.record is not None and result.adopted.status.record.file_count == 4
    # Try 1's next job ID is fenced too: the walk cannot know try 1 never got to it.
    assert states(result)["fenced"] == [(1, 1, "aborted")]
    assert result.job_id == try_job_id(KEY, 2), "the job the retry would have run"
    assert_committed(store, destination, expected_output(*attempts), job_id=first.job_id)
    assert inspect_job(store, destination, result.job_id).state is JobState.UNKNOWN


def test_a_job_past_its_commit_point_is_rolled_forward_and_adopted(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    """The driver died right after the commit point: no _SUCCESS, uploads maybe incomplete."""
    store, destination, _ = target
    faulty = FaultInjectingStore(store)
    first = job(target, try_job_id(KEY, 1), tmp_path, store=faulty)
    first.committer.setup_job()
    attempts = [first.run_task(task) for task in range(3)]
    decided: list[StoreCall] = []

    def first_write_after_the_commit_point(call: StoreCall) -> bool:
        if decided:
            return call.mutating
        if call.mutating and call.path.endswith(".outcome.json"):
            decided.append(call)
        return False

    faulty.inject(when=first_write_after_the_commit_point, mode="crash")
    with pytest.raises(SimulatedCrash):
        first.committer.commit_job([a.result for a in attempts])
    assert inspect_job(store, destination, first.job_id).state is JobState.COMMITTING

    result = plan(target, 2)
    assert states(result)["adopted"] == [(1, 0, "committed")]
    assert_committed(store, destination, expected_output(*attempts), job_id=first.job_id)


def test_a_delivered_job_is_not_adopted_and_the_cleared_task_runs_again(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    store, destination, _ = target
    first = job(target, try_job_id(KEY, 1), tmp_path)
    first.committer.setup_job()
    first.committer.commit_job([first.run_task(0).result])
    mark_delivered(store, destination, first.job_id)

    result = plan(target, 2)
    assert result.adopted is None
    assert states(result)["delivered"] == [(1, 0, "committed")]
    # Try 1's next job ID is fenced in case try 1 were still about to start it (it was not).
    assert states(result)["fenced"] == [(1, 1, "aborted")]
    assert result.job_id == try_job_id(KEY, 2)


def test_adoption_off_leaves_committed_jobs_and_runs_again(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    store, destination, _ = target
    first = job(target, try_job_id(KEY, 1), tmp_path)
    first.committer.setup_job()
    attempt = first.run_task(0)
    first.committer.commit_job([attempt.result])

    result = plan(target, 2, adopt_committed=False)
    assert result.adopted is None
    assert states(result)["not_adopted"] == [(1, 0, "committed")]
    assert result.job_id == try_job_id(KEY, 2)
    assert_committed(store, destination, expected_output(attempt), job_id=first.job_id)


def test_the_latest_committed_job_is_adopted(target: tuple[Store, StorePath, str], tmp_path: Path) -> None:
    """Tries 1 and 2 both committed and died (try 2 ran with adoption off): try 3 adopts try 2's."""
    for number in (1, 2):
        run = job(target, try_job_id(KEY, number), tmp_path)
        run.committer.setup_job()
        run.committer.commit_job([run.run_task(0, names=[f"part-{number}.bin"]).result])
    result = plan(target, 3)
    assert states(result)["adopted"] == [(2, 0, "committed")]
    assert states(result)["not_adopted"] == [(1, 0, "committed")]


# Fencing ------------------------------------------------------------------------------------------
def test_an_active_orphan_is_fenced_and_its_late_commit_is_refused(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    store, destination, _ = target
    orphan = job(target, try_job_id(KEY, 1), tmp_path)
    orphan.committer.setup_job()
    attempts = [orphan.run_task(task) for task in range(2)]  # uploads pending, temp trees present

    result = plan(target, 2)
    assert states(result)["fenced"] == [(1, 0, "aborted"), (1, 1, "aborted")]
    assert result.adopted is None and result.job_id == try_job_id(KEY, 2)
    assert_aborted(store, destination)

    with pytest.raises(JobFencedError):
        orphan.committer.commit_job([a.result for a in attempts])
    late = orphan.committer.task_attempt(5, 0)
    with pytest.raises(JobNotActiveError):
        late.setup_task()
    assert_aborted(store, destination)
    assert_nothing_left_behind(store, destination)


def test_a_job_that_never_started_is_fenced_before_it_can(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    """Try 1 died before its Spark job set up; the job could still start after the retry began."""
    store, destination, _ = target
    result = plan(target, 2)
    assert states(result)["fenced"] == [(1, 0, "aborted")]
    late = job(target, try_job_id(KEY, 1), tmp_path)
    with pytest.raises(JobFencedError):
        late.committer.setup_job()
    assert_aborted(store, destination)


def test_each_retry_steps_over_what_the_previous_one_fenced(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    """Walks stay short: try n fences one unused ID per earlier try and reads at most ~n²/2 states."""
    store, destination, _ = target
    for number in range(2, 6):
        result = plan(target, number)
        assert result.job_id == try_job_id(KEY, number)
        assert len(result.fenced) == sum(number - t for t in range(1, number)), number
        assert all(j.status.state is JobState.ABORTED for j in result.fenced)
    assert inspect_job(store, destination, try_job_id(KEY, 5)).state is JobState.UNKNOWN


# The same try number ran before ---------------------------------------------------------------------
def test_a_recreated_run_moves_past_its_delivered_job(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    """A DAG run deleted and re-created under the same run ID starts again at try 1."""
    store, destination, _ = target
    earlier = job(target, try_job_id(KEY, 1), tmp_path)
    earlier.committer.setup_job()
    earlier.committer.commit_job([earlier.run_task(0).result])
    mark_delivered(store, destination, earlier.job_id)

    result = plan(target, 1)
    assert result.job_id == try_job_id(KEY, 1, 1)
    assert states(result) == {
        "fenced": [],
        "delivered": [(1, 0, "committed")],
        "not_adopted": [],
        "adopted": [],
    }
    rerun = job(target, result.job_id, tmp_path)
    rerun.committer.setup_job()  # the new job ID is free to run


def test_a_try_that_ran_before_fences_its_own_dead_job(
    target: tuple[Store, StorePath, str], tmp_path: Path
) -> None:
    store, destination, _ = target
    earlier = job(target, try_job_id(KEY, 1), tmp_path)
    earlier.committer.setup_job()
    earlier.run_task(0)
    result = plan(target, 1)
    assert states(result)["fenced"] == [(1, 0, "aborted")]
    assert result.job_id == try_job_id(KEY, 1, 1)
    assert_aborted(store, destination)
