"""``on_kill`` at every step of a committed try, as Airflow delivers it: from the SIGTERM handler, in
the thread that runs ``execute``, which then carries on.

The kill comes at each store call a try makes in the worker, in turn (settling the jobs of earlier
tries, the ``_SUCCESS`` check, the delivered mark, and for an adopting try the same on the job it
adopts), through a store wrapper whose call runs ``on_kill`` first. Whatever the step, the try ends
in one of three states, and the next try leaves exactly one copy:

- failed before its job committed: nothing visible, nothing pending, and its job can never commit;
- failed with its job committed (the kill came after the commit point): the job is not delivered,
  and the next try adopts it without running Spark;
- succeeded: the kill came once the job was being marked delivered, the try's point of no return.

A kill while spark-submit runs is tested in test_committed_spark_submit.py (on_kill, the timeout),
one between ``Popen`` and the hook's record of the process in test_committed_spark_submit_hook.py.
The fake spark-submit (fake_spark_submit.py) is a real process committing through the core.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException
from fake_spark import FakeSpark, install_fake_spark
from support.faults import FaultInjectingStore, StoreCall
from support.invariants import assert_committed
from support.task_instances import task_instance

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.hooks import CommitStoreHook
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
from airflow_commit_provider.tries.plan import try_job_id

RUN_ID = "manual__2024-01-01T00:00:00+00:00"
KEY = TaskKey("ingest", "write", RUN_ID, -1)


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_default: None) -> FakeSpark:
    return install_fake_spark(tmp_path, monkeypatch)


def operator(destination: StorePath) -> CommittedSparkSubmitOperator:
    return CommittedSparkSubmitOperator(
        task_id="write", application="/jobs/app.py", destination=str(destination), committer="manifest"
    )


def fake_output(job_id: str) -> dict[str, bytes]:
    """What the fake application writes for a job: two task files."""
    return {f"part-{task:05d}-{job_id}.csv": b"id\n" + f"{task}\n".encode() * 10 for task in range(2)}


def visible(destination: StorePath) -> list[str]:
    names = (s.path.relative_to(destination) for s in LocalStore().list_files(destination))
    return sorted(name for name in names if not name.startswith(f"{RECORDS_DIR}/"))


class KillAtStoreCall:
    """Before the try's store call number `at` (counted over every store its hook opens, in
    order), runs the operator's ``on_kill`` in the calling thread, as the SIGTERM handler would."""

    def __init__(self, op: CommittedSparkSubmitOperator, at: int | None) -> None:
        self.op, self.at = op, at
        self.calls: list[StoreCall] = []
        self.kill_before: StoreCall | None = None

    def wrap(self, store: Store) -> FaultInjectingStore:
        wrapped = FaultInjectingStore(store)
        wrapped.on_call = self._on_call
        return wrapped

    def _on_call(self, call: StoreCall) -> None:
        self.calls.append(call)
        if len(self.calls) - 1 == self.at:
            self.kill_before = call
            self.op.on_kill()


REAL_GET_STORE = CommitStoreHook.get_store


def run_try(
    destination: StorePath, number: int, kill_at: int | None = None
) -> tuple[dict[str, Any] | None, KillAtStoreCall]:
    """Try `number` of the task, killed before its store call `kill_at`; its summary, or None if it
    failed (an AirflowException, the only way a try fails)."""
    op = operator(destination)
    killer = KillAtStoreCall(op, kill_at)
    ti = task_instance(
        dag_id=KEY.dag_id, task_id=KEY.task_id, run_id=KEY.run_id, map_index=-1, try_number=number
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CommitStoreHook, "get_store", lambda hook, url: killer.wrap(REAL_GET_STORE(hook, url)))
        try:
            return op.execute({"ti": ti}), killer
        except AirflowException:
            return None, killer


def outcome_of_killed_try(destination: StorePath, summary: dict[str, Any] | None, job: str) -> str:
    """Which of the three states the killed try left; asserts it is one of them."""
    store = LocalStore()
    status = inspect_job(store, destination, job)
    if summary is not None:
        assert status.delivered and summary["job_id"] == job, "a try that succeeded delivered its job"
        assert_committed(store, destination, fake_output(job), job_id=job)
        return "delivered"
    assert not status.delivered, "a failed try never delivers its job"
    if status.state is JobState.COMMITTED:
        assert_committed(store, destination, fake_output(job), job_id=job)
        return "committed"
    assert status.state in (JobState.ABORTED, JobState.UNKNOWN), status
    assert visible(destination) == [], "nothing of a try killed before its commit point is visible"
    return "aborted"


def kill_points(
    tmp_path: Path, fake_spark: FakeSpark, prepare: Callable[[StorePath], None], number: int
) -> list[StoreCall]:
    """The store calls an unkilled try `number` makes, after `prepare` (learned on a destination of its own)."""
    destination = StorePath.parse(str(tmp_path / "learn"))
    prepare(destination)
    fake_spark.mode("commit")
    summary, learned = run_try(destination, number)
    assert summary is not None and learned.calls, "the try runs through its steps"
    return learned.calls


def check_every_kill_point(
    tmp_path: Path,
    fake_spark: FakeSpark,
    prepare: Callable[[StorePath], None],
    number: int,
    job: str,
) -> dict[str, list[str]]:
    """Try `number`, killed at each of its store calls in turn (a destination each), then the next
    try; what each kill left, by outcome."""
    outcomes: dict[str, list[str]] = {}
    for at, call in enumerate(kill_points(tmp_path, fake_spark, prepare, number)):
        destination = StorePath.parse(str(tmp_path / f"kill-{at}"))
        prepare(destination)
        fake_spark.mode("commit")
        summary, killer = run_try(destination, number, kill_at=at)
        assert killer.kill_before is not None, f"the try made fewer calls than at {call}"
        outcome = outcome_of_killed_try(destination, summary, job)
        outcomes.setdefault(outcome, []).append(f"{call.op} {Path(call.path).name}")
        if summary is None:  # the task's next try: it adopts a committed job, or writes anew
            after, _ = run_try(destination, number + 1)
            assert after is not None
            expected = job if outcome == "committed" else try_job_id(KEY, number + 1)
            assert after["job_id"] == expected and inspect_job(LocalStore(), destination, expected).delivered
            assert_committed(LocalStore(), destination, fake_output(expected), job_id=expected)
    return outcomes


def test_a_try_killed_at_any_step_leaves_one_copy(fake_spark: FakeSpark, tmp_path: Path) -> None:
    """Try 1 writes: killed while settling (nothing to settle yet), while checking its _SUCCESS,
    or while marking its job delivered."""
    outcomes = check_every_kill_point(tmp_path, fake_spark, lambda _: None, 1, try_job_id(KEY, 1))
    assert set(outcomes) == {"aborted", "committed", "delivered"}, outcomes


def test_an_adopting_try_killed_at_any_step_leaves_one_copy(fake_spark: FakeSpark, tmp_path: Path) -> None:
    """Try 1's application failed after its commit; try 2 adopts its job and is killed at each step
    of that (settling, checking the adopted _SUCCESS, marking it delivered): a failed try 2 leaves
    the job committed for try 3 to adopt."""
    first = try_job_id(KEY, 1)

    def committed_by_try_1(destination: StorePath) -> None:
        """What try 1 left: its job committed as the fake application commits it, not delivered."""
        job = create_committer("manifest", LocalStore(), str(destination), first, CommitOptions(threads=2))
        job.setup_job()
        results = []
        for task, (name, data) in enumerate(fake_output(first).items()):
            attempt = job.task_attempt(task, 0)
            attempt.setup_task()
            with attempt.create_file(name) as stream:
                stream.write(data)
            results.append(attempt.commit_task(rows=10))
        job.commit_job(results)

    outcomes = check_every_kill_point(tmp_path, fake_spark, committed_by_try_1, 2, first)
    assert set(outcomes) == {"committed", "delivered"}, outcomes
    assert not (fake_spark.directory / "record.json").exists(), "no try ran Spark: each adopted the job"
