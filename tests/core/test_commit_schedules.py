"""Randomized schedules (hypothesis): failures, retries, speculation, partitions, aborts.

Hypothesis drives a small engine step by step. Task attempts start (some die mid-write), fail
(aborted by the engine or not), are retried, run speculatively, commit with their reply lost,
or get partitioned and commit only after the job ended; the job commits (possibly crashing part
way, then resumed by a new driver) or is aborted at any point. The correctness invariants are
checked on the final store state.

The engine behaves like Spark: the driver keeps the first commit result it receives per task.
For file-v1/file-v2 (last attempt wins) it also plays Spark's output-commit coordinator: once a
task has a result, other attempts of it are refused and aborted. The exclusive committers need
no coordinator: every attempt may commit and the first one wins.

file-v2 is run with its own model: task commit publishes, so an abort leaves committed tasks'
files and a retried task leaves the earlier attempt's extra files ("mixed output").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.faults import FaultInjectingStore, SimulatedCrash
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import (
    assert_aborted,
    assert_committed,
    assert_nothing_left_behind,
    is_commit_record,
    is_temp,
    store_files,
)
from support.workload import (
    ALL_COMMITTERS,
    EXCLUSIVE_COMMITTERS,
    LAST_WINS_COMMITTERS,
    JobRun,
    payload,
    supported,
    write_files,
)

from airflow_commit_provider.core.committers import TaskAttempt, create_committer
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.stages.errors import CommitError, JobNotActiveError
from airflow_commit_provider.core.store.base import Store

MAX_TASKS = 3
MAX_ATTEMPTS = 4
MAX_STEPS = 24


@dataclass
class SimAttempt:
    task: int
    number: int
    handle: TaskAttempt
    files: dict[str, bytes]
    state: str = "written"
    """written | partitioned | committed | aborted | dead | refused"""
    open_stream: object | None = None


@dataclass
class Engine:
    name: str
    job: JobRun
    tasks: int
    names: dict[int, list[str]]
    attempts: list[SimAttempt] = field(default_factory=list)
    results: dict[int, TaskCommitResult] = field(default_factory=dict)
    winners: dict[int, SimAttempt] = field(default_factory=dict)
    """The attempt whose output the task's commit holds (first for exclusive, last for v1/v2)."""
    published: dict[str, bytes] = field(default_factory=dict)
    """file-v2 only: what task commits already renamed into the destination."""
    state: str = "running"
    """running | commit_crashed | committed | aborted"""
    late_after_end: bool = False
    killed_writer: bool = False
    log: list[str] = field(default_factory=list)

    @property
    def exclusive(self) -> bool:
        return self.name in EXCLUSIVE_COMMITTERS

    def next_number(self, task: int) -> int:
        return sum(1 for a in self.attempts if a.task == task)

    def live(self, *states: str) -> list[SimAttempt]:
        return [a for a in self.attempts if a.state in states]


def start_attempt(engine: Engine, data: st.DataObject) -> None:
    candidates = [t for t in range(engine.tasks) if engine.next_number(t) < MAX_ATTEMPTS]
    if not candidates:
        return
    task = data.draw(st.sampled_from(candidates), label="task")
    number = engine.next_number(task)
    names = list(engine.names[task])
    if data.draw(st.booleans(), label="extra file"):
        names.append(f"extra/task{task}-attempt{number}.bin")
    handle = engine.job.committer.task_attempt(task, number)
    handle.setup_task()
    files = {n: payload(engine.job.job_id, task, number, n) for n in names}
    attempt = SimAttempt(task, number, handle, files)
    engine.attempts.append(attempt)
    if names and data.draw(st.integers(0, 5), label="dies mid-write") == 0:
        write_files(handle, dict(list(files.items())[:-1]))
        attempt.open_stream = handle.create_file(names[-1])
        attempt.open_stream.write(b"half a file")  # type: ignore[attr-defined]
        attempt.state = "dead"
        engine.log.append(f"start {handle.task_attempt_id} (dies mid-write)")
        return
    write_files(handle, files)
    engine.log.append(f"start {handle.task_attempt_id} {sorted(files)}")


def commit_attempt(engine: Engine, attempt: SimAttempt, data: st.DataObject) -> None:
    if not engine.exclusive and attempt.task in engine.results:
        attempt.handle.abort_task()  # the commit coordinator refuses a second committer
        attempt.state = "refused"
        engine.log.append(f"refuse {attempt.handle.task_attempt_id}")
        return
    result = attempt.handle.commit_task()
    attempt.state = "committed"
    if result.adopted_from is None:
        if engine.exclusive:
            assert attempt.task not in engine.winners, f"two winners for task {attempt.task}"
        engine.winners[attempt.task] = attempt
        if engine.name == "file-v2":
            engine.published.update(attempt.files)
    else:
        assert engine.exclusive
        assert result.adopted_from == attempt.handle.task_attempt_id
        assert result.task_attempt_id == engine.winners[attempt.task].handle.task_attempt_id
    delivered = data.draw(st.integers(0, 3), label="reply delivered") > 0
    if delivered and attempt.task not in engine.results:
        engine.results[attempt.task] = result
    engine.log.append(
        f"commit {attempt.handle.task_attempt_id} adopted_from={result.adopted_from} delivered={delivered}"
    )


def commit_job(engine: Engine, store: Store, data: st.DataObject) -> None:
    results = [engine.results[t] for t in range(engine.tasks)]
    crash_at = data.draw(st.one_of(st.none(), st.integers(0, 30)), label="job commit crashes at")
    if crash_at is None:
        engine.job.committer.commit_job(results)
        engine.state = "committed"
        engine.log.append("commit job")
        return
    dying = FaultInjectingStore(store)
    dying.inject(at=crash_at, mode=data.draw(st.sampled_from(["crash", "crash_after"]), label="crash mode"))
    committer = create_committer(
        engine.name, dying, engine.job.dest, engine.job.job_id, engine.job.committer.options
    )
    try:
        committer.commit_job(results)
    except SimulatedCrash:
        engine.state = "commit_crashed"
        # a local writer killed before its close leaves its hidden temp file beside the target
        engine.killed_writer |= dying.fired is not None and dying.fired.op == "write_close"
        engine.log.append(f"job commit crashed at {dying.fired}")
        return
    engine.state = "committed"
    engine.log.append(f"commit job (crash point {crash_at} not reached)")


def resume_job(engine: Engine) -> None:
    results = [engine.results[t] for t in range(engine.tasks)]
    try:
        engine.job.committer.commit_job(None)
    except CommitError as error:
        assert "no commit is under way" in str(error), error
        engine.job.committer.commit_job(results)
    engine.state = "committed"
    engine.log.append("resume job commit")


def abort_interrupted_job(engine: Engine) -> None:
    """Abort after the crash: all or nothing, decided by whether the commit point was reached."""
    decided = engine.job.store.get_status(engine.job.committer.layout.outcome) is not None
    result = engine.job.committer.abort_job("the driver failed in job commit")
    assert (result is not None) == decided, f"abort_job returned {result} with decided={decided}"
    engine.state = "committed" if decided else "aborted"
    engine.log.append(f"abort the interrupted job: {engine.state}")


def late_commit(engine: Engine, attempt: SimAttempt, data: st.DataObject) -> None:
    """A partitioned attempt comes back after the job ended: its commit must be refused."""
    engine.late_after_end = True
    if data.draw(st.booleans(), label="writes more after the job ended"):
        write_files(attempt.handle, {"late/after-end.bin": b"late"})
    if engine.name in LAST_WINS_COMMITTERS and attempt.task in engine.results and data.draw(st.booleans()):
        attempt.handle.abort_task()
        attempt.state = "refused"
        return
    with pytest.raises(JobNotActiveError):
        attempt.handle.commit_task()
    attempt.state = "refused"
    engine.log.append(f"late commit refused {attempt.handle.task_attempt_id}")


def run_schedule(name: str, env: CommitEnv, data: st.DataObject) -> Engine:
    dest = env.fresh_root().join("out")
    job = JobRun.create(name, env.store, dest, env.options(threads=2))
    tasks = data.draw(st.sampled_from([1, 2, 3, 2, 1, 0]), label="tasks")
    names = {
        t: [
            f"dt={t % 2}/part-{t:05d}-{i}.bin"
            for i in range(data.draw(st.integers(0, 2), label=f"files of {t}"))
        ]
        for t in range(tasks)
    }
    engine = Engine(name, job, tasks, names)
    job.committer.setup_job()
    for _ in range(MAX_STEPS):
        if engine.state != "running":
            break
        actions = ["start"]
        if engine.live("written"):
            actions += ["commit", "commit", "fail", "partition"]
        if len(engine.results) == tasks:
            actions += ["commit_job"]
        actions += ["abort_job"] if data.draw(st.integers(0, 9), label="abort now?") == 0 else []
        action = data.draw(st.sampled_from(actions), label="action")
        if action == "start":
            start_attempt(engine, data)
        elif action in ("commit", "fail", "partition"):
            attempt = data.draw(st.sampled_from(engine.live("written")), label="attempt")
            if action == "commit":
                commit_attempt(engine, attempt, data)
            elif action == "partition":
                attempt.state = "partitioned"
                engine.log.append(f"partition {attempt.handle.task_attempt_id}")
            elif data.draw(st.booleans(), label="engine aborts it"):
                attempt.handle.abort_task()
                attempt.state = "aborted"
                engine.log.append(f"abort {attempt.handle.task_attempt_id}")
            else:
                attempt.state = "dead"
                engine.log.append(f"dies {attempt.handle.task_attempt_id}")
        elif action == "commit_job":
            commit_job(engine, env.store, data)
        else:
            engine.job.committer.abort_job()
            engine.state = "aborted"
            engine.log.append("abort job")
    if engine.state == "running":
        # out of steps: finish the job the way a driver would
        for task in range(tasks):
            if task in engine.results:
                continue
            if engine.exclusive and task in engine.winners:
                retry = engine.job.committer.task_attempt(task, engine.next_number(task))
                retry.setup_task()
                engine.results[task] = retry.commit_task()  # adopts the winner
                continue
            attempt = SimAttempt(
                task,
                engine.next_number(task),
                engine.job.committer.task_attempt(task, engine.next_number(task)),
                {},
            )
            attempt.handle.setup_task()
            attempt.files = {n: payload(job.job_id, task, attempt.number, n) for n in names[task]}
            write_files(attempt.handle, attempt.files)
            engine.attempts.append(attempt)
            result = attempt.handle.commit_task()
            attempt.state = "committed"
            engine.results[task] = result
            engine.winners[task] = attempt
            if name == "file-v2":
                engine.published.update(attempt.files)
        commit_job(engine, env.store, data)
    if engine.state == "commit_crashed":
        # attempts still running may commit while the job commit is interrupted
        marker_gone = env.store.get_status(engine.job.committer.layout.job_marker) is None
        for attempt in engine.live("written", "partitioned"):
            if not data.draw(st.booleans(), label="commits during the interrupted job commit"):
                continue
            if marker_gone:  # the crash hit cleanup, after the job was committed: refused
                late_commit(engine, attempt, data)
            else:
                commit_attempt(engine, attempt, data)
        if data.draw(st.booleans(), label="the driver's failure path aborts the job"):
            abort_interrupted_job(engine)
        else:
            resume_job(engine)
    for attempt in engine.live("written", "partitioned"):
        if data.draw(st.booleans(), label="comes back late"):
            late_commit(engine, attempt, data)
    return engine


def check_schedule(engine: Engine, env: CommitEnv) -> None:
    store, dest = env.store, engine.job.dest
    # Local directories are checked too, except where a late writer re-created empty ones
    # or a killed writer left its hidden temp file (neither is a file any listing shows).
    strict = not (engine.late_after_end or engine.killed_writer)
    if engine.state == "aborted":
        if engine.name == "file-v2":
            visible = {
                k: v
                for k, v in store_files(store, dest).items()
                if not is_temp(k) and not is_commit_record(k)
            }
            assert visible == engine.published, "file-v2 abort: committed task output stays (known)"
            assert_nothing_left_behind(store, dest, strict_dirs=strict)
        else:
            assert_aborted(store, dest, strict_dirs=strict)
        return
    assert engine.state == "committed"
    for task, result in engine.results.items():
        assert result.task_attempt_id == engine.winners[task].handle.task_attempt_id, (
            f"the driver's result for task {task} is not the attempt that holds its commit"
        )
    committed: dict[str, bytes] = {}
    for task in range(engine.tasks):
        committed.update(engine.winners[task].files)
    expected = {**engine.published, **committed} if engine.name == "file-v2" else committed
    assert_committed(store, dest, expected, job_id=engine.job.job_id, committed=committed, strict_dirs=strict)


def run_and_check(name: str, env: CommitEnv, data: st.DataObject) -> None:
    engine = run_schedule(name, env, data)
    event(f"job {engine.state}")
    event(f"{engine.tasks} tasks, {len(engine.attempts)} attempts")
    for marker in (
        "adopted_from=attempt",
        "delivered=False",
        "job commit crashed",
        "late commit refused",
        "dies",
        "refuse ",
        "partition",
        "abort attempt",
    ):
        if any(marker in line for line in engine.log):
            event(f"schedule has: {marker.strip()}")
    try:
        check_schedule(engine, env)
    except AssertionError as error:
        raise AssertionError(f"{error}\nschedule:\n  " + "\n  ".join(engine.log)) from None


LOCAL_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    database=None,  # no example database in the working tree; failures print their reproduction
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
S3_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.mark.parametrize("name", ALL_COMMITTERS)
@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@LOCAL_SETTINGS
@given(data=st.data())
def test_random_schedules_local(commit_env: CommitEnv, name: str, data: st.DataObject) -> None:
    run_and_check(name, commit_env, data)


@pytest.mark.parametrize("commit_env", [pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
@S3_SETTINGS
@given(data=st.data())
def test_random_schedules_s3(commit_env: CommitEnv, data: st.DataObject) -> None:
    """Fewer examples on S3 (each costs real requests); the committer is drawn too."""
    name = data.draw(
        st.sampled_from([n for n in ALL_COMMITTERS if supported(n, commit_env.store)]), label="committer"
    )
    run_and_check(name, commit_env, data)
