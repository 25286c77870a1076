"""Committers by store, attempt-tagged output, and small drivers for tasks and jobs.

Every file an attempt writes carries the job, task and attempt in its bytes, so the invariant
checker can tell *which* attempt's output became visible, not just that some file did.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from airflow_commit_provider.core.committers import (
    COMMITTERS,
    CommitOptions,
    Committer,
    TaskAttempt,
    committer_class,
    committer_names,
    create_committer,
)
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

ALL_COMMITTERS = tuple(COMMITTERS)
#: First committed attempt of a task wins; later ones adopt it (create-if-absent task commit).
EXCLUSIVE_COMMITTERS = committer_names(exclusive_task_commit=True)
#: Last committed attempt wins, as in Hadoop; the engine's commit coordinator lets one commit.
LAST_WINS_COMMITTERS = committer_names(exclusive_task_commit=False)
UPLOAD_COMMITTERS = committer_names(family="upload")
#: The committers that resolve conflict_mode fail/replace at job commit (over the destination or per partition).
CONFLICT_RESOLVING_COMMITTERS = tuple(name for name, cls in COMMITTERS.items() if cls.traits.conflicts)
#: The committers that give every correctness property (file-v2, unsafe, is the documented exception).
CORRECT_COMMITTERS = committer_names(unsafe=False)

COMMITTER_PARAMS = [pytest.param(name, id=name) for name in ALL_COMMITTERS]
CORRECT_COMMITTER_PARAMS = [pytest.param(name, id=name) for name in CORRECT_COMMITTERS]
EXCLUSIVE_COMMITTER_PARAMS = [pytest.param(name, id=name) for name in EXCLUSIVE_COMMITTERS]


def one_store_each(names: tuple[str, ...] = ALL_COMMITTERS, *, first: str = "s3") -> list:
    """Parameters for ``("name", "commit_env")`` (``indirect=["commit_env"]``): each committer once,
    on one store, for a property of the shared protocol (the stores' contract is its own test).

    The stores alternate down the list, `first` first; a committer the S3 store cannot host (the
    manifest committer: no atomic rename) runs locally and the alternation goes on past it. A
    module alternates `first` between its tests, so every committer still meets both stores and
    every property both stores, at half the runs of every committer on every store.
    """
    kinds = ("s3", "local") if first == "s3" else ("local", "s3")
    params, turn = [], 0
    for name in names:
        if "atomic_rename" in committer_class(name).required_capabilities:
            kind = "local"
        else:
            kind, turn = kinds[turn % 2], turn + 1
        marks = [pytest.mark.s3] if kind == "s3" else []
        params.append(pytest.param(name, kind, id=f"{name}-{kind}", marks=marks))
    return params


def each_committer_once(
    names: tuple[str, ...] = ALL_COMMITTERS, *, first: str = "s3"
) -> pytest.MarkDecorator:
    """`one_store_each` as the test's parametrization of `name` and the `commit_env` fixture."""
    return pytest.mark.parametrize(
        ("name", "commit_env"), one_store_each(names, first=first), indirect=["commit_env"]
    )


def each_committer_per_variant(
    argname: str, variants: Sequence[tuple[object, str, str]], names: tuple[str, ...] = ALL_COMMITTERS
) -> pytest.MarkDecorator:
    """`each_committer_once` for every variant of one more argument, `argname`: `variants` are
    ``(value, id, first store)``; variants that alternate `first` keep every committer on both stores."""
    return pytest.mark.parametrize(
        ("name", "commit_env", argname),
        [
            pytest.param(*param.values, value, id=f"{param.id}-{label}", marks=param.marks)
            for value, label, first in variants
            for param in one_store_each(names, first=first)
        ],
        indirect=["commit_env"],
    )


def supported(name: str, store: Store) -> bool:
    """Whether `store` has what the committer needs (the manifest committer refuses S3: no atomic rename)."""
    return all(getattr(store.capabilities, need) for need in committer_class(name).required_capabilities)


def skip_unsupported(name: str, store: Store) -> None:
    if not supported(name, store):
        pytest.skip(f"{name} refuses {type(store).__name__} by design (tested in test_commit_formats)")


def new_job_id() -> str:
    return uuid.uuid4().hex


def make_options(staging_dir: str | os.PathLike[str] | None = None, **overrides: object) -> CommitOptions:
    """Test options: file-v2 allowed, a small pool, staging buffered under the test's tmp dir."""
    values: dict[str, object] = {"allow_unsafe_v2": True, "threads": 4}
    if staging_dir is not None:
        values["local_staging_dir"] = os.fspath(staging_dir)
    values.update(overrides)
    return CommitOptions(**values)  # type: ignore[arg-type]


def payload(job_id: str, task: int, attempt: int, name: str, size: int = 0) -> bytes:
    """Bytes that say which job, task and attempt wrote `name`, padded to at least `size`."""
    head = f"job={job_id} task={task} attempt={attempt} file={name}\n".encode()
    return head + b"x" * max(0, size - len(head))


def task_files(task: int, count: int = 2, *, partitioned: bool = True) -> list[str]:
    """Relative output names of a task, the same for every attempt (as Spark names them)."""
    names = []
    for index in range(count):
        part = f"part-{task:05d}-{index}.bin"
        names.append(f"dt=2024-01-0{1 + (task + index) % 3}/{part}" if partitioned else part)
    return names


def write_files(attempt: TaskAttempt, files: Mapping[str, bytes]) -> None:
    for name, data in files.items():
        with attempt.create_file(name) as stream:
            stream.write(data)


@dataclass
class Attempt:
    """One task attempt and the files it wrote."""

    task: int
    number: int
    handle: TaskAttempt
    files: dict[str, bytes] = field(default_factory=dict)
    result: TaskCommitResult | None = None

    @property
    def attempt_id(self) -> str:
        return self.handle.task_attempt_id


@dataclass
class JobRun:
    """A committer plus the bookkeeping a test driver needs."""

    committer: Committer
    store: Store
    dest: StorePath
    job_id: str

    @classmethod
    def create(
        cls,
        name: str,
        store: Store,
        dest: StorePath,
        options: CommitOptions | None = None,
        job_id: str | None = None,
    ) -> JobRun:
        job_id = job_id or new_job_id()
        return cls(
            create_committer(name, store, dest, job_id, options or make_options()), store, dest, job_id
        )

    @property
    def name(self) -> str:
        return self.committer.name

    def attempt(self, task: int, number: int, names: list[str] | None = None, *, size: int = 0) -> Attempt:
        """Set up an attempt and write its files (each tagged with this attempt)."""
        handle = self.committer.task_attempt(task, number)
        handle.setup_task()
        names = task_files(task) if names is None else names
        files = {name: payload(self.job_id, task, number, name, size) for name in names}
        write_files(handle, files)
        return Attempt(task, number, handle, files)

    def commit(self, attempt: Attempt) -> TaskCommitResult:
        attempt.result = attempt.handle.commit_task()
        return attempt.result

    def run_task(
        self, task: int, number: int = 0, names: list[str] | None = None, *, size: int = 0
    ) -> Attempt:
        attempt = self.attempt(task, number, names, size=size)
        self.commit(attempt)
        return attempt


def expected_output(*attempts: Attempt) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for attempt in attempts:
        out.update(attempt.files)
    return out
