"""The commit point: a job is committed or aborted, never both, whoever acts and whenever it dies.

- A real process is SIGKILLed at each kind of store call of its job commit (`kill_points`; every
  committer locally, two on S3 at S3's own points), then the job is aborted (as the operator does
  on failure): the end state is all or nothing, never part of the output, never old
  data mixed with new under `replace`, and nothing pending.
- A commit and an abort race from two processes, in both orders and at chosen points: exactly one
  decision stands and the store ends consistent with it.
- A fenced job can never start, commit a task or commit; its late output is discarded.
- Damaged, foreign or misplaced outcome files and records are refused with the file named.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from support.faults import FaultInjectingStore, StoreCall
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_aborted, assert_committed, store_files
from support.workload import (
    CONFLICT_RESOLVING_COMMITTERS,
    CORRECT_COMMITTERS,
    JobRun,
    each_committer_once,
    each_committer_per_variant,
    one_store_each,
    skip_unsupported,
)

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.outcome import JobOutcome
from airflow_commit_provider.core.job_control import JobState, finish_or_fence, inspect_job, mark_delivered
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import JobFencedError, JobNotActiveError
from airflow_commit_provider.core.store.base import Store

#: The partition the job replaces holds old data; the other one must survive a partitioned replace.
OLD_FILES = {"dt=0/old-0.bin": b"old data of dt=0\n", "dt=9/old-9.bin": b"old data of dt=9\n"}
KILL_DEADLINE = 120.0


@dataclass
class Scenario:
    """A job with every task committed, waiting for its job commit, over some pre-existing data."""

    name: str
    conflict_mode: str
    job: JobRun
    results: list[TaskCommitResult]
    new_files: dict[str, bytes]

    @property
    def dest(self) -> StorePath:
        return self.job.dest

    def expected_if_committed(self) -> dict[str, bytes]:
        if self.conflict_mode != "replace":
            return {**OLD_FILES, **self.new_files}
        if self.name == "directory":
            return dict(self.new_files)
        return {**{k: v for k, v in OLD_FILES.items() if not k.startswith("dt=0/")}, **self.new_files}


def conflict_modes(name: str) -> list[str]:
    return ["append", "replace"] if name in CONFLICT_RESOLVING_COMMITTERS else ["append"]


def prepare(env: CommitEnv, name: str, conflict_mode: str, dest: StorePath, tasks: int = 3) -> Scenario:
    for relative, data in OLD_FILES.items():
        env.store.write_bytes(dest.join(relative), data)
    job = JobRun.create(name, env.store, dest, env.options(threads=1, conflict_mode=conflict_mode))
    job.committer.setup_job()
    per_task = 1  # a second file per task repeats each kind of call, so it adds no kill point
    new_files: dict[str, bytes] = {}
    results = []
    for task in range(tasks):
        names = [f"dt={(task + i) % 2}/part-{task:05d}-{i}.bin" for i in range(per_task)]
        attempt = job.run_task(task, 0, names)
        new_files.update(attempt.files)
        assert attempt.result is not None
        results.append(attempt.result)
    return Scenario(name, conflict_mode, job, results, new_files)


def assert_all_or_nothing(
    env: CommitEnv, scenario: Scenario, committed: bool, *, strict_dirs: bool = True
) -> None:
    """`strict_dirs=False` where a local writer was killed mid-close: its hidden temp file stays
    in `.__uploads__`, which no listing shows (the orphan cleanup's job)."""
    if committed:
        assert_committed(
            env.store,
            scenario.dest,
            scenario.expected_if_committed(),
            job_id=scenario.job.job_id,
            committed=scenario.new_files,
            strict_dirs=strict_dirs,
        )
    else:
        assert_aborted(env.store, scenario.dest, OLD_FILES, strict_dirs=strict_dirs)


# A real process, SIGKILLed at an exact store call -----------------------------------------------
def _pause_forever_at(index: int, signal_fd: int) -> Callable[[StoreCall], None]:
    def hook(call: StoreCall) -> None:
        if call.index == index:
            os.write(signal_fd, b"k")
            threading.Event().wait()  # the parent kills us here

    return hook


def _commit_until_killed(
    make_store: Callable[[], Store], scenario: Scenario, options: object, index: int, signal_fd: int
) -> None:
    store = FaultInjectingStore(make_store())
    store.on_call = _pause_forever_at(index, signal_fd)
    create_committer(scenario.name, store, scenario.dest, scenario.job.job_id, options).commit_job(
        scenario.results
    )


def kill_commit_at(make_store: Callable[[], Store], scenario: Scenario, index: int) -> bool:
    """Run job commit in a child process and SIGKILL it at store call `index`; False if it finished."""
    read_fd, write_fd = os.pipe()
    child = multiprocessing.get_context("fork").Process(
        target=_commit_until_killed,
        args=(make_store, scenario, scenario.job.committer.options, index, write_fd),
    )
    child.start()
    os.close(write_fd)
    try:
        while True:
            ready, _, _ = select.select([read_fd], [], [], KILL_DEADLINE)
            assert ready, f"job commit neither reached call {index} nor finished in {KILL_DEADLINE}s"
            if os.read(read_fd, 1) == b"k":
                os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
                child.join()
                assert child.exitcode == -signal.SIGKILL
                return True
            child.join()  # end of file: the commit finished before reaching the call
            assert child.exitcode == 0, f"job commit failed in the child (exit {child.exitcode})"
            return False
    finally:
        os.close(read_fd)


def job_commit_calls(env: CommitEnv, name: str, conflict_mode: str) -> list[StoreCall]:
    scenario = prepare(env, name, conflict_mode, env.fresh_root().join("count"))
    store = FaultInjectingStore(env.store)
    create_committer(
        name, store, scenario.dest, scenario.job.job_id, scenario.job.committer.options
    ).commit_job(scenario.results)
    return store.calls


def call_kind(call: StoreCall, decision: int) -> tuple[str, str, str]:
    """What sets a store call apart from another: its operation, its side of the commit point and
    its object's shape (`StoreCall.shape`: the same step on the next file, task or partition is
    the same kind)."""
    side = "before" if call.index < decision else "decision" if call.index == decision else "after"
    return call.op, side, call.shape


def kill_points(calls: list[StoreCall], local: bool) -> list[int]:
    """Locally the first call of each kind (`call_kind`: every operation in every phase, not its
    repetitions over the other files, tasks and partitions), the calls around the commit point and
    the last one. On S3, where each kill costs real requests and the protocol is the one checked
    locally, what is S3's own: the calls around the commit point and each operation after it."""
    decision = next(call.index for call in calls if _is_decision(call))
    chosen = {0, decision - 1, decision, decision + 1, len(calls) - 1}
    if local:
        kinds: dict[tuple[str, str, str], int] = {}
        for call in calls:
            kinds.setdefault(call_kind(call, decision), call.index)
        return sorted(chosen | set(kinds.values()))
    chosen.update(call.index for call in reversed(calls) if call.index > decision)
    by_op: dict[str, int] = {}
    for call in calls:
        if call.index > decision:
            by_op.setdefault(call.op, call.index)
    chosen.update(by_op.values())
    return sorted(index for index in chosen if 0 <= index < len(calls))[:12]


def every_committer_locally_and(*on_s3: str) -> pytest.MarkDecorator:
    """Every committer's sweep on local files, and these committers' on S3 as well."""
    return pytest.mark.parametrize(
        ("name", "commit_env"),
        [pytest.param(name, "local", id=f"{name}-local") for name in CORRECT_COMMITTERS]
        + [pytest.param(name, "s3", id=f"{name}-s3", marks=pytest.mark.s3) for name in on_s3],
        indirect=["commit_env"],
    )


@every_committer_locally_and("file-v1", "magic")
def test_abort_after_the_committing_process_is_killed_is_all_or_nothing(
    commit_env: CommitEnv, name: str, request: pytest.FixtureRequest
) -> None:
    """The operator's failure path: the driver dies in job commit, then the try's job is aborted."""
    env = commit_env
    skip_unsupported(name, env.store)
    make_store = env.store_factory(request)
    failures = []
    for conflict_mode in conflict_modes(name):
        calls = job_commit_calls(env, name, conflict_mode)
        decision = next(call.index for call in calls if call.path.endswith(".outcome.json") and call.mutating)
        for index in kill_points(calls, env.kind == "local"):
            scenario = prepare(env, name, conflict_mode, env.fresh_root().join("out"))
            killed = kill_commit_at(make_store, scenario, index)
            visible_before_abort = {
                k for k in store_files(env.store, scenario.dest) if k in scenario.new_files
            }
            # the aborting process knows only the job: the conflict mode comes from the outcome
            rolled_forward = create_committer(
                name, env.store, scenario.dest, scenario.job.job_id, env.options(threads=1)
            ).abort_job("the try failed")
            committed = rolled_forward is not None
            try:
                assert committed == (not killed or index > decision), (
                    f"killed at call {index}, decision at {decision}: committed={committed}"
                )
                assert committed or not visible_before_abort, "output was visible before the commit point"
                killed_writer = killed and calls[index].op == "write_close"
                assert_all_or_nothing(env, scenario, committed, strict_dirs=not killed_writer)
            except AssertionError as error:
                failures.append(f"{conflict_mode}, killed at {calls[index]}: {error}")
    assert not failures, "\n".join(failures)


# Commit and abort racing from two processes ------------------------------------------------------
class Gate:
    """Stops a child process before a chosen store call until the parent opens the gate."""

    def __init__(self) -> None:
        self.reached_read, self.reached_write = os.pipe()
        self.open_read, self.open_write = os.pipe()

    def hook(self, when: Callable[[StoreCall], bool]) -> Callable[[StoreCall], None]:
        fired = threading.Event()

        def pause(call: StoreCall) -> None:
            if not fired.is_set() and when(call):
                fired.set()
                os.write(self.reached_write, b"r")
                os.read(self.open_read, 1)

        return pause

    def wait_reached(self) -> None:
        ready, _, _ = select.select([self.reached_read], [], [], KILL_DEADLINE)
        assert ready and os.read(self.reached_read, 1) == b"r", "the child never reached the gate"

    def open(self) -> None:
        os.write(self.open_write, b"o")


def _run_in_child(action: Callable[[], object], result_write: int) -> None:
    try:
        outcome = action()
        os.write(result_write, b"committed" if outcome is not None else b"aborted")
    except JobFencedError:
        os.write(result_write, b"fenced")


def run_child(action: Callable[[], object]) -> tuple[multiprocessing.process.BaseProcess, int]:
    read_fd, write_fd = os.pipe()
    child = multiprocessing.get_context("fork").Process(target=_run_in_child, args=(action, write_fd))
    child.start()
    os.close(write_fd)
    return child, read_fd


def child_result(child: multiprocessing.process.BaseProcess, read_fd: int) -> str:
    child.join(KILL_DEADLINE)
    assert child.exitcode == 0, f"child failed (exit {child.exitcode})"
    result = os.read(read_fd, 100).decode()
    os.close(read_fd)
    return result


def committer_in_child(
    make_store: Callable[[], Store], scenario: Scenario, gate: Gate | None, when: Callable[[StoreCall], bool]
) -> Callable[[], object]:
    def commit() -> object:
        store = FaultInjectingStore(make_store())
        if gate is not None:
            store.on_call = gate.hook(when)
        job = create_committer(
            scenario.name, store, scenario.dest, scenario.job.job_id, scenario.job.committer.options
        )
        return job.commit_job(scenario.results)

    return commit


def aborter(make_store: Callable[[], Store], scenario: Scenario) -> Callable[[], object]:
    def abort() -> object:
        job = create_committer(scenario.name, make_store(), scenario.dest, scenario.job.job_id)
        return job.abort_job("fenced by another process")

    return abort


def _makes_visible(fragment: str) -> Callable[[StoreCall], bool]:
    """The first call that makes a file under `fragment` visible (a rename's target counts)."""
    ops = ("complete_multipart_upload", "rename_file", "get_status")
    return lambda call: call.op in ops and fragment in call.path.split(" -> ")[-1]


def _is_decision(call: StoreCall) -> bool:
    return call.path.endswith(".outcome.json") and call.mutating


def _after_decision(calls_seen: list[StoreCall]) -> Callable[[StoreCall], bool]:
    def when(call: StoreCall) -> bool:
        calls_seen.append(call)
        return call.op in ("complete_multipart_upload", "rename_file", "get_status", "write_bytes") and any(
            _is_decision(seen) for seen in calls_seen[:-1]
        )

    return when


@each_committer_per_variant(
    "order",
    [("fence-first", "fence-first", "s3"), ("commit-first", "commit-first", "local")],
    CORRECT_COMMITTERS,
)
def test_commit_racing_a_fence_from_another_process(
    commit_env: CommitEnv, name: str, order: str, request: pytest.FixtureRequest
) -> None:
    """Exactly one decision wins; the loser follows it; the store ends consistent either way."""
    env = commit_env
    skip_unsupported(name, env.store)
    make_store = env.store_factory(request)
    conflict_mode = conflict_modes(name)[-1]
    scenario = prepare(env, name, conflict_mode, env.fresh_root().join("out"))
    gate = Gate()
    when = _is_decision if order == "fence-first" else _after_decision([])
    commit_child, commit_result = run_child(committer_in_child(make_store, scenario, gate, when))
    gate.wait_reached()  # the committer stands just before its decision, or just after it
    abort_child, abort_result = run_child(aborter(make_store, scenario))
    aborted = child_result(abort_child, abort_result)
    gate.open()
    committed = child_result(commit_child, commit_result)
    if order == "fence-first":
        assert (aborted, committed) == ("aborted", "fenced")
    else:
        assert (aborted, committed) == ("committed", "committed")
    assert_all_or_nothing(env, scenario, order == "commit-first")
    state = inspect_job(env.store, scenario.dest, scenario.job.job_id).state
    assert state == (JobState.ABORTED if order == "fence-first" else JobState.COMMITTED)


@every_committer_locally_and("file-v1", "partitioned")
def test_concurrent_abort_at_any_point_of_a_live_commit(
    commit_env: CommitEnv, name: str, request: pytest.FixtureRequest
) -> None:
    """An abort runs to its end while the commit is stopped at call k; then the commit goes on."""
    env = commit_env
    skip_unsupported(name, env.store)
    make_store = env.store_factory(request)
    conflict_mode = conflict_modes(name)[-1]
    calls = job_commit_calls(env, name, conflict_mode)
    decision = next(call.index for call in calls if _is_decision(call))
    failures = []
    for index in kill_points(calls, env.kind == "local")[:: 1 if env.kind == "local" else 2]:
        scenario = prepare(env, name, conflict_mode, env.fresh_root().join("out"))
        gate = Gate()
        commit_child, commit_result = run_child(
            committer_in_child(make_store, scenario, gate, lambda call, index=index: call.index == index)
        )
        gate.wait_reached()
        abort_child, abort_result = run_child(aborter(make_store, scenario))
        aborted = child_result(abort_child, abort_result)
        gate.open()
        committed = child_result(commit_child, commit_result)
        try:
            past_decision = index > decision
            assert aborted == ("committed" if past_decision else "aborted"), (index, decision, aborted)
            assert committed == ("committed" if past_decision else "fenced"), (index, decision, committed)
            assert_all_or_nothing(env, scenario, past_decision)
        except AssertionError as error:
            failures.append(f"stopped at {calls[index]}: {error}")
    assert not failures, "\n".join(failures)


# A fenced job stays dead ----------------------------------------------------------------------------
@each_committer_once(CORRECT_COMMITTERS, first="local")
def test_a_fenced_job_never_starts_commits_or_keeps_late_output(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    committed = job.run_task(0, 0, ["dt=1/part-0.bin"])
    late = job.attempt(1, 0, ["dt=2/part-1.bin"])
    status = finish_or_fence(env.store, env.dest, job.job_id, name, env.options(), reason="a retry took over")
    assert status.state == JobState.ABORTED
    with pytest.raises(JobNotActiveError):
        late.handle.commit_task()
    assert committed.result is not None
    with pytest.raises(JobFencedError, match="a retry took over"):
        job.committer.commit_job([committed.result])
    with pytest.raises(JobFencedError, match="already decided"):
        create_committer(name, env.store, env.dest, job.job_id, env.options()).setup_job()
    assert_aborted(env.store, env.dest)


@each_committer_once(CORRECT_COMMITTERS)
def test_a_job_never_set_up_can_be_fenced_before_its_driver_starts(commit_env: CommitEnv, name: str) -> None:
    """An Airflow retry fences the earlier try's job even if that try's driver has not started yet."""
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    assert inspect_job(env.store, env.dest, job.job_id).state == JobState.UNKNOWN
    assert finish_or_fence(env.store, env.dest, job.job_id, name).state == JobState.ABORTED
    with pytest.raises(JobFencedError):
        job.committer.setup_job()
    assert_aborted(env.store, env.dest)


@each_committer_once(CORRECT_COMMITTERS, first="local")
def test_job_states_from_setup_to_delivery(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    assert inspect_job(env.store, env.dest, job.job_id).state == JobState.ACTIVE
    attempt = job.run_task(0, 0, ["dt=1/part-0.bin"])
    assert attempt.result is not None
    dying = FaultInjectingStore(env.store)
    dying.inject(when=_makes_visible("dt=1/"), mode="crash")
    with pytest.raises(BaseException, match="died"):
        create_committer(name, dying, env.dest, job.job_id, env.options()).commit_job([attempt.result])
    status = inspect_job(env.store, env.dest, job.job_id)
    assert status.state == JobState.COMMITTING and status.committer == name and status.record is None
    status = finish_or_fence(env.store, env.dest, job.job_id, "magic")  # the outcome's committer wins
    assert status.state == JobState.COMMITTED and not status.delivered
    assert status.record is not None and status.record.file_count == 1
    mark_delivered(env.store, env.dest, job.job_id)
    assert inspect_job(env.store, env.dest, job.job_id).delivered
    assert_committed(env.store, env.dest, attempt.files, job_id=job.job_id)


# Bad outcome files and records ------------------------------------------------------------------------
def _outcome_bytes(job_id: str, **changes: object) -> bytes:
    payload_ = json.loads(JobOutcome(job_id, "commit", "magic").to_bytes())
    payload_.update(changes)
    return json.dumps(payload_).encode()


BAD_OUTCOMES = {
    "corrupt": lambda job_id: b'{"name": "airflow_commit.JobOutc',
    "foreign-version": lambda job_id: _outcome_bytes(job_id, name="airflow_commit.JobOutcome/9"),
    "another-job": lambda job_id: _outcome_bytes(job_id, jobId="someone-else"),
    "unknown-decision": lambda job_id: _outcome_bytes(job_id, decision="maybe"),
    "bad-task-list": lambda job_id: _outcome_bytes(job_id, committed=[{"files": 1}]),
}


@pytest.mark.parametrize(
    ("name", "commit_env", "damage"),
    [
        # Every damage once and every committer once (the outcome's reader is theirs in common).
        pytest.param(*param.values, damage, id=f"{param.id}-{damage}", marks=param.marks)
        for param, damage in zip(one_store_each(CORRECT_COMMITTERS), sorted(BAD_OUTCOMES), strict=True)
    ],
    indirect=["commit_env"],
)
def test_a_bad_outcome_file_is_refused_naming_it(commit_env: CommitEnv, name: str, damage: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0, ["dt=1/part-0.bin"])
    assert attempt.result is not None
    env.store.write_bytes(job.committer.layout.outcome, BAD_OUTCOMES[damage](job.job_id))
    for action in (
        lambda: job.committer.commit_job([attempt.result]),  # type: ignore[list-item]
        lambda: inspect_job(env.store, env.dest, job.job_id),
    ):
        with pytest.raises(InvalidCommitDataError) as caught:
            action()
        assert str(job.committer.layout.outcome) in str(caught.value)
    visible = [k for k in store_files(env.store, env.dest) if not k.startswith(("_", "."))]
    assert visible == [], f"something became visible: {visible}"
    # Nothing of the job is visible, so abort may overrule the file (tests/fuzz/test_fuzz_hostile_records.py).
    assert job.committer.abort_job() is None
    assert inspect_job(env.store, env.dest, job.job_id).state == JobState.ABORTED
    assert_aborted(env.store, env.dest)


@pytest.mark.parametrize("damage", ["corrupt", "foreign-version", "another-job"])
def test_a_bad_job_record_is_refused_naming_it(commit_env: CommitEnv, damage: str) -> None:
    env = commit_env
    job = JobRun.create("magic" if env.kind == "s3" else "manifest", env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0, ["dt=1/part-0.bin"])
    assert attempt.result is not None
    job.committer.commit_job([attempt.result])
    record = job.committer.layout.job_record
    good = env.store.read_bytes(record)
    bad = {
        "corrupt": good[: len(good) // 2],
        "foreign-version": good.replace(b"SuccessData/1", b"SuccessData/7"),
        "another-job": good.replace(job.job_id.encode(), b"another-job"),
    }[damage]
    env.store.write_bytes(record, bad)
    with pytest.raises(InvalidCommitDataError) as caught:
        inspect_job(env.store, env.dest, job.job_id)
    assert str(record) in str(caught.value)
    with pytest.raises(InvalidCommitDataError):
        job.committer.commit_job(None)


def test_outcome_and_record_requests_per_job(commit_env: CommitEnv) -> None:
    """What the commit point costs: O(1) requests per job commit (reading and deciding the outcome,
    the file list before it, the record after), plus one per partition marker."""
    env = commit_env
    name = "partitioned"
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    results = []
    for task in range(4):
        attempt = job.run_task(task, 0, [f"dt={task % 2}/part-{task}.bin"])
        assert attempt.result is not None
        results.append(attempt.result)
    counting = FaultInjectingStore(env.store)
    create_committer(name, counting, env.dest, job.job_id, env.options()).commit_job(results)
    records = [call for call in counting.calls if "/_airflow_commit/" in call.path]
    markers = [call for call in counting.calls if call.path.endswith("/_SUCCESS") and "/dt=" in call.path]
    # The outcome read, the file list written (before the commit point), the outcome created (the
    # commit point), its index entry created, the record written.
    assert [call.op for call in records] == [
        "read_bytes",
        "write_stream",
        "write_bytes_if_absent",
        "write_bytes_if_absent",
        "write_bytes",
    ]
    assert "/files-" in records[1].path
    assert "/_airflow_commit/_index/" in records[3].path
    partitions = 2
    assert len([call for call in markers if call.op == "write_bytes"]) == partitions
    assert len([call for call in markers if call.op != "write_bytes"]) <= partitions  # stale markers deleted
