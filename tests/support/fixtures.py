"""Fixtures for the commit tests; a test module imports the ones it uses.

Import the `*_fixture` functions: pytest registers them under their `name=` (`commit_env`, ...),
so test arguments of that name do not shadow an imported name.

`commit_env` runs a test once on the local filesystem and once on the embedded S3, like the
shared `store_root` fixture of tests/conftest.py, but on S3 it gives each test a fresh prefix in
one bucket with one client instead of a fresh bucket and client: on SeaweedFS a new bucket costs
about 0.6 s (bucket, volume allocation on first write, client, deletion), which dominates these
small protocol tests. Every check is scoped to the test's own prefix, so isolation is the same.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_commit_provider.core.committers import CommitOptions
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from support.workload import make_options

if TYPE_CHECKING:
    from airflow_commit_provider.core.store.s3 import S3Store
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3


@dataclass
class CommitEnv:
    store: Store
    root: StorePath
    dest: StorePath
    staging: Path

    @property
    def kind(self) -> str:
        return "local" if self.root.is_local else "s3"

    def options(self, **overrides: object) -> CommitOptions:
        return make_options(self.staging, **overrides)

    def fresh_root(self) -> StorePath:
        """A new, empty directory for one example of a property-based test."""
        return self.root.join(f"ex-{uuid.uuid4().hex[:12]}")

    def store_factory(self, request: pytest.FixtureRequest) -> Callable[[], Store]:
        """Makes a new store of this kind, e.g. in a forked child that must not share a client."""
        if self.kind == "local":
            return type(self.store)
        return request.getfixturevalue("embedded_s3").store

    def staging_leftovers(self) -> list[str]:
        if not self.staging.exists():
            return []
        return sorted(str(p.relative_to(self.staging)) for p in self.staging.rglob("*") if p.is_file())


@pytest.fixture(scope="session", name="commit_s3")
def commit_s3_fixture(embedded_s3: EmbeddedS3) -> Iterator[tuple[S3Store, str]]:
    """One store and one bucket for the commit tests (per test module)."""
    bucket = embedded_s3.create_bucket(f"commit-{uuid.uuid4().hex[:16]}")
    store = embedded_s3.store()
    yield store, bucket
    store.close()
    with contextlib.suppress(Exception):
        embedded_s3.delete_bucket(bucket)


@pytest.fixture(name="scratch_dir")
def scratch_dir_fixture(tmp_path: Path) -> Iterator[Path]:
    """A local directory on tmpfs when the machine has one, else the test's tmp_path.

    The fault sweeps create and delete thousands of small files; on a disk-backed filesystem
    mounted with `discard` each unlink/rmdir costs milliseconds. tmpfs has the same POSIX
    semantics the local store relies on (atomic rename, O_EXCL, hard links).
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        directory = Path(tempfile.mkdtemp(prefix="commit-tests-", dir=shm))
        yield directory
        shutil.rmtree(directory, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture(name="commit_env", params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def commit_env_fixture(request: pytest.FixtureRequest, scratch_dir: Path) -> CommitEnv:
    """(store, root, dest, staging dir) on each store; the S3 one starts the embedded server lazily."""
    if request.param == "local":
        from airflow_commit_provider.core.store.local import LocalStore

        root = StorePath.parse(str(scratch_dir / "store"))
        store: Store = LocalStore()
    else:
        store, bucket = request.getfixturevalue("commit_s3")
        root = StorePath("s3", bucket, f"t-{uuid.uuid4().hex[:16]}")
    return CommitEnv(store, root, root.join("out"), scratch_dir / "staging")
