"""The seeds' correctness properties on ``hdfs://``: every property of tests/core/test_commit_properties.py
that takes a committer and a store, run on the test cluster's HDFS (through WebHDFS) for the
committers HDFS hosts, the rename ones (``manifest``, ``file-v1``), wherever that module runs them.

The properties are the protocol's, so they are defined once, there; this module runs the same
functions against a third store. Complete, exclusive, concurrent task commits, abortable (task and
job), continuity of correctness (late commits change nothing), what to commit never comes from a
listing alone, and two jobs at one destination (and at a sibling prefix) kept apart.

Cost: about 30 properties, each a few jobs of a few files on the session's cluster (some tens of
WebHDFS requests a job).
"""

from __future__ import annotations

import importlib.util
import inspect
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support.fixtures import CommitEnv

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

pytestmark = pytest.mark.hadoop_cluster

PROPERTIES_FILE = Path(__file__).resolve().parents[1] / "core" / "test_commit_properties.py"
#: The committers that need no multipart upload: those HDFS hosts.
RENAME_COMMITTERS = ("manifest", "file-v1")


def _properties() -> ModuleType:
    """tests/core/test_commit_properties.py, loaded under a name of its own (its tests are not
    collected again from here: only `test_property_holds_on_hdfs` is)."""
    spec = importlib.util.spec_from_file_location("hdfs_commit_properties", PROPERTIES_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _committers_of(function: object) -> set[str]:
    """The committers a property's parametrization runs it for (its ``name`` values)."""
    names: set[str] = set()
    for mark in getattr(function, "pytestmark", []):
        if mark.name == "parametrize" and "name" in mark.args[0]:
            for param in mark.args[1]:
                values = getattr(param, "values", param)
                names.add(values[0])
    return names


def _cases(module: ModuleType) -> list[object]:
    """(property, committer) for every property of signature ``(commit_env, name)`` and every rename
    committer it runs for."""
    cases = []
    for attribute, function in sorted(vars(module).items()):
        if not attribute.startswith("test_") or not callable(function):
            continue
        if list(inspect.signature(function).parameters) != ["commit_env", "name"]:
            continue
        for name in RENAME_COMMITTERS:
            if name in _committers_of(function):
                cases.append(pytest.param(attribute, name, id=f"{attribute.removeprefix('test_')}-{name}"))
    return cases


PROPERTIES = _properties()
CASES = _cases(PROPERTIES)


@pytest.fixture(scope="module")
def hdfs_store(hadoop_cluster: HadoopCluster) -> Iterator[HdfsStore]:
    store = HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url))
    yield store
    store.close()


@pytest.fixture
def hdfs_commit_env(
    hdfs_store: HdfsStore, hadoop_cluster: HadoopCluster, tmp_path: Path
) -> Iterator[CommitEnv]:
    """What `commit_env` gives a property, on HDFS: a fresh root, removed afterwards."""
    root = StorePath.parse(f"{hadoop_cluster.fs_default_name}/properties-{uuid.uuid4().hex[:12]}")
    yield CommitEnv(hdfs_store, root, root.join("out"), tmp_path / "staging")
    hdfs_store.delete_tree(root)


def test_every_rename_committer_property_is_run() -> None:
    """The selection is not empty and covers both committers: a change to the property module's
    parametrization cannot silently leave HDFS untested."""
    committers = {case.values[1] for case in CASES}  # type: ignore[attr-defined]
    assert committers == set(RENAME_COMMITTERS)
    assert len(CASES) >= 20


@pytest.mark.parametrize(("prop", "name"), CASES)
def test_property_holds_on_hdfs(prop: str, name: str, hdfs_commit_env: CommitEnv) -> None:
    getattr(PROPERTIES, prop)(hdfs_commit_env, name)
