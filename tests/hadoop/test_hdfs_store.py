"""The store contract on HDFS (the test cluster, through WebHDFS), and what only HDFS needs checked.

The contract's tests are those of tests/core/test_store_contract.py, one definition: every test there
that takes `store_root` runs here with this module's `store_root`, a fresh folder on the cluster's
HDFS (the multipart ones do not apply: HDFS has no multipart uploads). They run in the side lane,
beside the cluster, instead of starting it in the main lane.

Cost: about 15 s for the contract and the HDFS-only checks on the session's cluster, and 5-15 s for
the listing past one page (a thousand and one folders, made 8 at a time).
"""

from __future__ import annotations

import importlib.util
import inspect
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.hdfs import namespace_counts

from airflow_commit_provider.core.hadoop_conf import hadoop_conf_value
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import FileAlreadyExistsError, FileNotFoundInStoreError, Store
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

StoreRoot = tuple[Store, StorePath]


def _contract_tests() -> dict[str, object]:
    """The contract's tests that take `store_root`, from the file that defines them for every store."""
    path = Path(__file__).resolve().parents[1] / "core" / "test_store_contract.py"
    spec = importlib.util.spec_from_file_location("store_contract_on_hdfs", path)
    assert spec is not None and spec.loader is not None
    contract = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(contract)
    return {
        name: test
        for name, test in vars(contract).items()
        if name.startswith("test_") and callable(test) and "store_root" in inspect.signature(test).parameters
    }


globals().update(_contract_tests())


@pytest.fixture
def store_root(hadoop_cluster: HadoopCluster) -> Iterator[StoreRoot]:
    """A fresh folder on the cluster's HDFS, removed afterwards."""
    store = HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url))
    root = StorePath.parse(f"{hadoop_cluster.fs_default_name}/contract-{uuid.uuid4().hex[:12]}")
    yield store, root
    store.delete_tree(root)
    store.close()


def listed(store: Store, directory: StorePath) -> set[StorePath]:
    return {status.path for status in store.list_files(directory)}


def test_hdfs_counts_requests(store_root: StoreRoot) -> None:
    """What each call costs in WebHDFS requests: a write is CREATE (NameNode, then DataNode), the
    RENAME into place and the DELETE of the emptied hidden folder; a rename into an existing folder
    is one request."""
    store, root = store_root
    store.write_bytes(root.join("a"), b"12345")
    store.read_bytes(root.join("a"))
    store.get_status(root.join("a"))
    list(store.list_files(root))
    store.rename_file(root.join("a"), root.join("b"))
    assert store.statistics.snapshot() == {
        "op_put": 1,
        "bytes_uploaded": 5,
        "op_rename": 2,  # the write's, then rename_file's
        "op_delete": 1,  # the write's hidden folder
        "op_get": 1,
        "op_head": 1,
        "op_list": 1,
    }


def test_hdfs_lists_in_key_order(store_root: StoreRoot) -> None:
    """HDFS lists a folder by its names' bytes taken as signed (``é`` first, ``a`` before ``a-b``);
    keys order ``a-b`` and ``a.c`` before ``a/``, and ``é`` last."""
    store, root = store_root
    for name in ("ab", "a/x", "é", "a.c", "a-b"):
        store.write_bytes(root.join(name), b"x")
    assert [status.path.relative_to(root) for status in store.list_files(root)] == [
        "a-b",
        "a.c",
        "a/x",
        "ab",
        "é",
    ]


def test_hdfs_rename_that_cannot_happen_makes_no_folder(store_root: StoreRoot) -> None:
    """A late attempt's rename, whose work its job's cleanup removed: refused, and the destination's
    missing folders are not made for it."""
    store, root = store_root
    store.prepare_directory(root)
    with pytest.raises(FileNotFoundInStoreError, match="rename source does not exist"):
        store.rename_file(root.join("gone"), root.join("p=1", "deeper", "part-0"))
    assert store.list_child_dirs(root) == []


def test_hdfs_create_if_absent_has_one_winner_among_racers(
    store_root: StoreRoot, hadoop_cluster: HadoopCluster
) -> None:
    """Eight writers race to create one file: the NameNode lets exactly one rename win, the file
    holds that writer's bytes whole, and the losers' hidden writes are gone."""
    store, root = store_root
    path = root.join("commit", "marker")
    outcomes: dict[int, str] = {}

    def race(writer: int) -> None:
        try:
            store.write_bytes(path, f"writer {writer}".encode() * 1000, if_absent=True)
            outcomes[writer] = "won"
        except FileAlreadyExistsError:
            outcomes[writer] = "lost"

    threads = [threading.Thread(target=race, args=(writer,)) for writer in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (winner,) = [writer for writer, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8
    assert store.read_bytes(path) == f"writer {winner}".encode() * 1000
    assert listed(store, root) == {path}
    assert namespace_counts(hadoop_cluster, root.join("commit")) == (1, 1), "a hidden write is left"


def test_hdfs_lists_past_one_page(store_root: StoreRoot, hadoop_cluster: HadoopCluster) -> None:
    """A folder of more entries than the NameNode gives in one listing (``dfs.ls.limit``) is listed
    whole, page by page, each page after the last name of the one before."""
    store, root = store_root
    limit = int(hadoop_conf_value("hdfs-site.xml", "dfs.ls.limit", hadoop_cluster.env())[0] or 1000)
    names = [f"d{index:05d}" for index in range(limit + 1)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(store.prepare_directory, (root.join(name) for name in names)))
    before = store.statistics.snapshot().get("op_list", 0)
    assert store.list_child_dirs(root) == names
    assert store.statistics.snapshot()["op_list"] - before == 2, "two pages"
