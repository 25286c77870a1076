"""Conflict modes of the staging committers, on both stores.

partitioned: `replace` deletes existing files only in the partitions the job writes; `fail`
refuses when a partition it writes already has data (before anything becomes visible); `append`
adds. directory: the same over the whole destination (`fail` already at job setup).
Hidden files (`_SUCCESS`, `.x`, `_temporary` of other jobs) never count as output.
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.faults import FaultInjectingStore, SimulatedCrash
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_aborted, assert_committed, store_files
from support.workload import CONFLICT_RESOLVING_COMMITTERS, JobRun

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.stages import conflicts
from airflow_commit_provider.core.stages.errors import OutputConflictError

EXISTING = {
    "dt=1/old-a.bin": b"day 1, from yesterday's run",
    "dt=2/old-a.bin": b"day 2, old",
    "dt=2/old-b.bin": b"day 2, old too",
}
NEW_NAMES = ["dt=2/new-0.bin", "dt=3/new-0.bin"]


def seed(env: CommitEnv, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        env.store.write_bytes(env.dest.join(relative), data)


def run_job(env: CommitEnv, name: str, mode: str, names: list[str] = NEW_NAMES) -> tuple[JobRun, dict, list]:
    job = JobRun.create(name, env.store, env.dest, env.options(conflict_mode=mode))
    job.committer.setup_job()
    first = job.run_task(0, 0, names[:1])
    second = job.run_task(1, 0, names[1:])
    return job, {**first.files, **second.files}, [first.result, second.result]


# partitioned -------------------------------------------------------------------------------------
def test_partitioned_replace_only_touches_written_partitions(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "replace")
    success = job.committer.commit_job(results)
    expected = {"dt=1/old-a.bin": EXISTING["dt=1/old-a.bin"], **new}
    assert_committed(env.store, env.dest, expected, job_id=job.job_id, committed=new)
    assert sorted(success.partitions) == ["dt=2", "dt=3"]


def test_partitioned_replace_rerun_is_idempotent(commit_env: CommitEnv) -> None:
    """A daily job re-run (backfill) replaces its own day again and touches nothing else."""
    env = commit_env
    seed(env, EXISTING)
    for _ in range(2):
        job, new, results = run_job(env, "partitioned", "replace")
        job.committer.commit_job(results)
    assert_committed(
        env.store,
        env.dest,
        {"dt=1/old-a.bin": EXISTING["dt=1/old-a.bin"], **new},
        job_id=job.job_id,
        committed=new,
    )


def test_partitioned_fail_refuses_an_existing_partition(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, _new, results = run_job(env, "partitioned", "fail")
    with pytest.raises(OutputConflictError, match="dt=2/old-") as caught:
        job.committer.commit_job(results)
    assert "conflict_mode='fail'" in str(caught.value)
    visible = {k: v for k, v in store_files(env.store, env.dest).items() if not k.startswith("_")}
    assert visible == EXISTING, "a refused commit made output visible or changed existing files"
    job.committer.abort_job()
    assert_aborted(env.store, env.dest, EXISTING)


def test_partitioned_fail_accepts_new_partitions(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "fail", ["dt=3/new-0.bin", "dt=4/new-0.bin"])
    job.committer.commit_job(results)
    assert_committed(env.store, env.dest, {**EXISTING, **new}, job_id=job.job_id, committed=new)


def test_partitioned_append_adds(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "append", ["dt=2/new-0.bin", "dt=2/old-b.bin"])
    job.committer.commit_job(results)
    assert_committed(env.store, env.dest, {**EXISTING, **new}, job_id=job.job_id, committed=new)
    assert store_files(env.store, env.dest)["dt=2/old-b.bin"] == new["dt=2/old-b.bin"]  # same name: replaced


def test_partitioned_replace_resumes_after_a_crash_in_the_replace_step(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "partitioned", "replace")
    dying = FaultInjectingStore(env.store)
    dying.inject(when=lambda call: call.op == "delete_files", mode="crash")
    with pytest.raises(SimulatedCrash):
        create_committer("partitioned", dying, env.dest, job.job_id, job.committer.options).commit_job(
            results
        )
    create_committer("partitioned", env.store, env.dest, job.job_id, job.committer.options).commit_job(None)
    assert_committed(
        env.store,
        env.dest,
        {"dt=1/old-a.bin": EXISTING["dt=1/old-a.bin"], **new},
        job_id=job.job_id,
        committed=new,
    )


# directory ---------------------------------------------------------------------------------------
def test_directory_fail_refuses_at_setup_and_leaves_nothing(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    committer = create_committer(
        "directory", env.store, env.dest, "job-fail", env.options(conflict_mode="fail")
    )
    with pytest.raises(OutputConflictError, match="already holds") as caught:
        committer.setup_job()
    assert "dt=" in str(caught.value)
    assert_aborted(env.store, env.dest, EXISTING)


def test_directory_fail_refuses_output_that_appeared_after_setup(commit_env: CommitEnv) -> None:
    env = commit_env
    job, _new, results = run_job(env, "directory", "fail")
    seed(env, {"dt=9/someone-else.bin": b"written by another writer during the job"})
    with pytest.raises(OutputConflictError, match="someone-else"):
        job.committer.commit_job(results)
    job.committer.abort_job()
    assert_aborted(
        env.store, env.dest, {"dt=9/someone-else.bin": b"written by another writer during the job"}
    )


def test_directory_fail_ignores_hidden_files(commit_env: CommitEnv) -> None:
    env = commit_env
    hidden = {".hidden/x.bin": b"not output", "_logs/y.bin": b"not output either"}
    seed(env, hidden)
    job, new, results = run_job(env, "directory", "fail")
    job.committer.commit_job(results)
    assert_committed_with_hidden(env, job, {**new}, hidden)


def assert_committed_with_hidden(env: CommitEnv, job: JobRun, expected: dict, hidden: dict) -> None:
    files = store_files(env.store, env.dest)
    for relative, data in hidden.items():
        assert files.pop(relative) == data
        env.store.delete(env.dest.join(relative))
    assert_committed(env.store, env.dest, expected, job_id=job.job_id)


def test_directory_replace_replaces_everything_visible(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, {**EXISTING, "deep/er/file.bin": b"old"})
    hidden = {".keep": b"hidden files stay"}
    seed(env, hidden)
    job, new, results = run_job(env, "directory", "replace")
    job.committer.commit_job(results)
    assert_committed_with_hidden(env, job, new, hidden)


def test_directory_append_adds(commit_env: CommitEnv) -> None:
    env = commit_env
    seed(env, EXISTING)
    job, new, results = run_job(env, "directory", "append")
    job.committer.commit_job(results)
    assert_committed(env.store, env.dest, {**EXISTING, **new}, job_id=job.job_id, committed=new)


def test_unknown_conflict_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="conflict_mode 'overwrite'"):
        CommitOptions(conflict_mode="overwrite")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CONFLICT_RESOLVING_COMMITTERS)
def test_fail_mode_resume_does_not_trip_over_its_own_output(commit_env: CommitEnv, name: str) -> None:
    """A job commit in `fail` mode dies after making some files visible; resuming must not take
    the job's own files for somebody else's output."""
    env = commit_env
    job, new, results = run_job(env, name, "fail")
    completes: list[int] = []

    def second_complete(call) -> bool:  # type: ignore[no-untyped-def]
        if call.op == "complete_multipart_upload":
            completes.append(call.index)
        return len(completes) == 2

    dying = FaultInjectingStore(env.store)
    dying.inject(when=second_complete, mode="crash")
    options = env.options(conflict_mode="fail", threads=1)
    with pytest.raises(SimulatedCrash):
        create_committer(name, dying, env.dest, job.job_id, options).commit_job(results)
    assert 0 < len({k for k in store_files(env.store, env.dest) if not k.startswith("_")}) < len(new)
    create_committer(name, env.store, env.dest, job.job_id, options).commit_job(None)
    assert_committed(env.store, env.dest, new, job_id=job.job_id)


# replace's two ways of listing the partitions written ------------------------------------------
WIDE_EXISTING = {
    "dt=2024-01-01/old.bin": b"replaced",
    "dt=2024-01-01/h=0/old.bin": b"replaced: h=0 is written too",
    "dt=2024-01-01/h=1/old.bin": b"stays: h=1 is not written",
    "dt=2024-01-01/sub/deep.bin": b"stays: not directly in a partition written",
    "dt=2024-01-010/old.bin": b"stays: a sibling whose name extends dt=2024-01-01's",
    "dt=2024-01-01x/old.bin": b"stays: another sibling",
    "dt=2024-01-02/old-a.bin": b"replaced",
    "dt=2024-01-02/old-b.bin": b"replaced too",
    "dt=2024-01-020/old.bin": b"stays",
    "top.bin": b"stays unless the job writes at the top",
}
WIDE_HIDDEN = {
    "dt=2024-01-01/_hidden.bin": b"hidden files never count",
    "dt=2024-01-02/.dot.bin": b"nor do dot files",
    "dt=2024-01-03/_logs/x.bin": b"nor a hidden folder's files",
}
WIDE_NAMES = [
    "dt=2024-01-01/new-0.bin",
    "dt=2024-01-01/h=0/new-0.bin",
    "dt=2024-01-02/old-a.bin",  # the job's own file of an existing name: replaced by its upload
    "dt=2024-01-03/new-0.bin",
    "dt=2024-01-04/new-0.bin",
]
WIDE_PARTITIONS = 5  # the top holds none of the job's files


@pytest.mark.parametrize("at_top", [False, True], ids=["partitions", "and the top"])
@pytest.mark.parametrize(
    ("route", "from_partitions", "keys_per_partition", "lists"),
    [
        ("one LIST per partition", 10**9, 20, WIDE_PARTITIONS),
        ("one listing of the parent", 1, 20, 1),
        ("the parent given up past its budget", 1, 0, 1 + WIDE_PARTITIONS),
    ],
)
def test_partitioned_replace_finds_the_same_files_either_way(
    commit_env: CommitEnv,
    monkeypatch: pytest.MonkeyPatch,
    route: str,
    from_partitions: int,
    keys_per_partition: int,
    lists: int,
    at_top: bool,
) -> None:
    """Listing each partition written, or their common parent once, replaces exactly the visible
    files directly in a partition the job writes: not a sibling whose name extends one
    (dt=2024-01-010 is not dt=2024-01-01), not a folder below one, not hidden files. The phase's
    LIST requests show which way it went (one page each here); a parent holding more than its
    budget (the job's own files, then 0 keys per partition) is given up for one LIST each. A job
    that writes at the top too replaces the top's own files, and lists it once more."""
    monkeypatch.setattr(conflicts, "PARENT_LISTING_PARTITIONS", from_partitions)
    monkeypatch.setattr(conflicts, "PARENT_LISTING_KEYS_PER_PARTITION", keys_per_partition)
    env = commit_env
    seed(env, {**WIDE_EXISTING, **WIDE_HIDDEN})
    job = JobRun.create("partitioned", env.store, env.dest, env.options(conflict_mode="replace"))
    job.committer.setup_job()
    names = [*WIDE_NAMES, "top-new.bin"] if at_top else WIDE_NAMES
    attempts = [job.run_task(task, 0, [name]) for task, name in enumerate(names)]
    record = job.committer.commit_job([attempt.result for attempt in attempts])

    files = store_files(env.store, env.dest)
    visible = {
        name: data
        for name, data in files.items()
        if not any(part.startswith(("_", ".")) for part in name.split("/"))
    }
    new = {name: data for attempt in attempts for name, data in attempt.files.items()}
    kept = {name: data for name, data in WIDE_EXISTING.items() if data.startswith(b"stays")}
    if at_top:
        del kept["top.bin"]
        lists += lists > 1  # the top is one more partition to list
    assert visible == {**kept, **new}, route
    assert {name: files.get(name) for name in WIDE_HIDDEN} == WIDE_HIDDEN, route
    (phase,) = [phase for phase in record.phases or () if phase.name == "conflict mode replace"]
    assert phase.requests.get("list") == lists, (route, phase.requests)


#: Folder names whose prefixes and byte order trip a plain prefix match: `a-` and `a.` sort before
#: `a/`, `a0` after it, `a=1` is a prefix of `a=10`; `_h` and `.d` are hidden.
FOLDERS = ["a", "a-", "a.", "a0", "a=1", "a=10", "b", "_h", ".d"]
FILES = ["x.bin", "y.bin", "_s.bin", ".t.bin"]


def layout(folders: list[str], files: list[str]) -> st.SearchStrategy[str]:
    return st.builds(
        lambda parts, name: "/".join([*parts, name]),
        st.lists(st.sampled_from(folders), max_size=3),
        st.sampled_from(files),
    )


@pytest.mark.parametrize("commit_env", ["local"], indirect=True)
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    existing=st.sets(layout(FOLDERS, FILES), max_size=14),
    written=st.sets(layout(FOLDERS[:-2], FILES[:2]), min_size=1, max_size=6),
)
def test_replace_lists_alike_either_way_on_any_layout(
    commit_env: CommitEnv, existing: set[str], written: set[str]
) -> None:
    """Any files, any written partitions: listing each partition or their common parent leaves the
    same store, the one replace promises: the visible files directly in a partition written are
    gone unless the job wrote them again; everything else stays as it was."""
    env = commit_env
    written_folders = {name.rpartition("/")[0] for name in written}
    replaced = {
        name
        for name in existing
        if name.rpartition("/")[0] in written_folders and not name.rpartition("/")[2].startswith(("_", "."))
    }
    outcomes = []
    for from_partitions in (10**9, 1):
        dest = env.fresh_root()
        for name in sorted(existing):
            env.store.write_bytes(dest.join(name), f"old {name}".encode())
        job = JobRun.create("partitioned", env.store, dest, env.options(conflict_mode="replace"))
        job.committer.setup_job()
        attempt = job.run_task(0, 0, sorted(written))
        with mock.patch.object(conflicts, "PARENT_LISTING_PARTITIONS", from_partitions):
            job.committer.commit_job([attempt.result])
        files = store_files(env.store, dest)
        expected = {name: f"old {name}".encode() for name in existing - replaced - written}
        assert {name: files.get(name) for name in expected} == expected, from_partitions
        assert {name: files.get(name) for name in attempt.files} == attempt.files, from_partitions
        gone = sorted(name for name in replaced - written if name in files)
        assert not gone, (from_partitions, gone)
        outcomes.append({name: data for name, data in files.items() if name in existing | written})
    assert outcomes[0].keys() == outcomes[1].keys()
