"""The store contract, checked on the local store and on S3 (embedded SeaweedFS); on HDFS by
tests/hadoop/test_hdfs_store.py, which runs these same tests beside the cluster (the side lane).

Committers are written once against `Store`; these tests pin down the behaviour they rely on,
in particular directory boundaries (`dataset1` never covers `dataset10`), create-if-absent,
publish-on-close streams and the multipart upload lifecycle.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

import pytest

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import (
    FileAlreadyExistsError,
    FileNotFoundInStoreError,
    NoSuchUploadError,
    Store,
    StoreError,
    open_store,
)
from airflow_commit_provider.core.store.s3_requests import REQUEST_PATH_ENV, chosen_request_path

StoreRoot = tuple[Store, StorePath]

#: S3's request paths for the hot calls (complete, abort, part, put); every contract test runs on both.
REQUEST_PATHS = ("crt", "boto3")

#: The smallest size S3 accepts for a part that is not the last one.
MIN_PART = 5 * 1024 * 1024

SPECIAL_NAMES = [
    "with space/file name.txt",
    "percent%25/100%.txt",
    "ünïcødé/日本語.txt",
    "year=2024/k=v=w.txt",
]


@pytest.fixture(
    params=["local", *(pytest.param(f"s3-{path}", marks=pytest.mark.s3) for path in REQUEST_PATHS)]
)
def store_root(request: pytest.FixtureRequest) -> Iterator[StoreRoot]:
    """The suite's `store_root`, with S3 once per request path (both are part of the contract)."""
    if request.param == "local":
        yield request.getfixturevalue("local_store_root")
        return
    path = request.param.removeprefix("s3-")
    if path == "crt":
        pytest.importorskip("awscrt", reason="the CRT request path needs awscrt (the [crt] extra)")
    store = request.getfixturevalue("embedded_s3").store(request_path=path)
    assert store.hot.name == path
    yield store, StorePath("s3", request.getfixturevalue("s3_bucket"), "root")
    store.close()


@pytest.fixture
def local_store_root(local_root: StorePath) -> Iterator[StoreRoot]:
    from airflow_commit_provider.core.store.local import LocalStore

    local = LocalStore()
    yield local, local_root
    local.close()


def listed(store: Store, directory: StorePath) -> set[StorePath]:
    return {status.path for status in store.list_files(directory)}


# Objects -----------------------------------------------------------------------------------------
def test_write_read_roundtrip(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("a", "b.bin")
    store.write_bytes(path, b"first")
    assert store.read_bytes(path) == b"first"
    store.write_bytes(path, b"second, longer")  # plain writes overwrite
    assert store.read_bytes(path) == b"second, longer"
    status = store.get_status(path)
    assert status is not None
    assert (status.path, status.size) == (path, len(b"second, longer"))
    assert abs(status.modified - time.time()) < 300


def test_write_if_absent_refuses_existing_file(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("marker")
    store.write_bytes(path, b"winner", if_absent=True)
    with pytest.raises(FileAlreadyExistsError):
        store.write_bytes(path, b"loser", if_absent=True)
    assert store.read_bytes(path) == b"winner"


def test_missing_file(store_root: StoreRoot) -> None:
    store, root = store_root
    missing = root.join("no", "such", "file")
    assert store.get_status(missing) is None
    with pytest.raises(FileNotFoundInStoreError) as caught:
        store.read_bytes(missing)
    assert isinstance(caught.value, FileNotFoundError)
    assert "file" in str(caught.value)
    store.delete(missing)  # deleting a missing file is not an error


@pytest.mark.parametrize("size", [0, 1, 9, 10, 11, 1000])
def test_read_bytes_within_a_limit(store_root: StoreRoot, size: int) -> None:
    """What lets a reader refuse a file by its size before reading it: None past the limit, in one
    request (a ranged GET on S3)."""
    store, root = store_root
    path = root.join("within", f"file-{size}")
    data = bytes(i % 251 for i in range(size))
    store.write_bytes(path, data)
    before = store.statistics.snapshot().get("op_get", 0)
    limits = (0, 1, 10, 10_000)
    assert [store.read_bytes_within(path, limit) for limit in limits] == [
        data if size <= limit else None for limit in limits
    ]
    assert store.statistics.snapshot()["op_get"] - before == len(limits), "one request per read"
    with pytest.raises(FileNotFoundInStoreError):
        store.read_bytes_within(root.join("within", "missing"), 10)


@pytest.mark.parametrize("size", [0, 1, 1000])
def test_read_range(store_root: StoreRoot, size: int) -> None:
    """What a page or the head of a large file costs: only the bytes asked for, fewer at the end,
    none past it, one request each (a ranged GET on S3)."""
    store, root = store_root
    path = root.join("ranges", f"file-{size}")
    data = bytes(i % 251 for i in range(size))
    store.write_bytes(path, data)
    ranges = [
        (0, 0),
        (0, 1),
        (0, size),
        (0, size + 1),
        (1, 10),
        (max(size - 1, 0), 5),
        (size, 1),
        (size + 10, 3),
    ]
    before = store.statistics.snapshot().get("op_get", 0)
    assert [store.read_range(path, start, length) for start, length in ranges] == [
        data[start : start + length] for start, length in ranges
    ]
    asked = sum(1 for _, length in ranges if length)
    assert store.statistics.snapshot().get("op_get", 0) - before == asked, (
        "one request per range, none for 0 bytes"
    )
    with pytest.raises(FileNotFoundInStoreError):
        store.read_range(root.join("ranges", "missing"), 0, 10)
    with pytest.raises(ValueError, match="ranges/file"):
        store.read_range(path, -1, 10)


def test_get_status_of_directory_is_none(store_root: StoreRoot) -> None:
    store, root = store_root
    store.write_bytes(root.join("dir", "file"), b"x")
    assert store.get_status(root.join("dir")) is None


def test_list_files_is_recursive_and_respects_directory_boundary(store_root: StoreRoot) -> None:
    store, root = store_root
    inside = [root.join("dataset1", "a"), root.join("dataset1", "sub", "deeper", "b")]
    outside = [root.join("dataset10", "c"), root.join("dataset1.txt"), root.join("dataset1x", "d")]
    for path in inside + outside:
        store.write_bytes(path, path.name.encode())
    assert listed(store, root.join("dataset1")) == set(inside)
    assert listed(store, root) == set(inside + outside)
    sizes = {status.path: status.size for status in store.list_files(root.join("dataset1"))}
    assert sizes == {root.join("dataset1", "a"): 1, root.join("dataset1", "sub", "deeper", "b"): 1}


def test_list_child_dirs_is_one_level_and_respects_directory_boundary(store_root: StoreRoot) -> None:
    store, root = store_root
    scope = root.join("out")
    for path in (
        scope.join("a", "f"),
        scope.join("a", "deep", "g"),
        scope.join("b c", "h"),
        scope.join("top"),
    ):
        store.write_bytes(path, b"x")
    store.write_bytes(root.join("out10", "z", "f"), b"x")
    assert store.list_child_dirs(scope) == ["a", "b c"]
    assert store.list_child_dirs(scope.join("a")) == ["deep"]
    assert store.list_child_dirs(root.join("missing")) == []


def test_list_page_is_in_key_order_after_a_key_and_respects_directory_boundary(store_root: StoreRoot) -> None:
    store, root = store_root
    scope = root.join("index")
    names = ["b", "a/z", "c", "a/y", "ab", "é"]  # key order: a/y a/z ab b c é (UTF-8 bytes)
    for name in names:
        store.write_bytes(scope.join(name), name.encode())
    store.write_bytes(root.join("index0", "a"), b"x")
    store.write_bytes(root.join("index.txt"), b"x")

    def page(limit: int, after: str = "") -> list[str]:
        return [status.path.relative_to(scope) for status in store.list_page(scope, limit=limit, after=after)]

    assert page(3) == ["a/y", "a/z", "ab"]
    assert page(3, after="ab") == ["b", "c", "é"]
    assert page(2, after="a/y") == ["a/z", "ab"]
    assert page(10, after="c") == ["é"]
    assert page(10, after="é") == []
    assert store.list_page(root.join("missing"), limit=5) == []
    assert [s.size for s in store.list_page(scope, limit=1)] == [3]
    with pytest.raises(ValueError, match=r"^limit: a page holds at least 1 file, got 0$"):
        store.list_page(scope, limit=0)


def test_list_files_of_missing_directory_is_empty(store_root: StoreRoot) -> None:
    store, root = store_root
    assert listed(store, root.join("nothing", "here")) == set()


def test_delete_tree_respects_directory_boundary(store_root: StoreRoot) -> None:
    store, root = store_root
    for name in ("dataset1/a", "dataset1/sub/b", "dataset10/c", "dataset1.txt"):
        store.write_bytes(root.join(name), b"x")
    assert store.delete_tree(root.join("dataset1")) == 2
    assert listed(store, root.join("dataset1")) == set()
    assert listed(store, root) == {root.join("dataset10", "c"), root.join("dataset1.txt")}


def test_delete_and_delete_files(store_root: StoreRoot) -> None:
    store, root = store_root
    paths = [root.join("many", f"part-{i:05d}") for i in range(7)]
    for path in paths:
        store.write_bytes(path, b"x")
    store.delete(paths[0])
    assert store.get_status(paths[0]) is None
    store.delete_files([*paths[1:5], root.join("many", "missing")])
    assert listed(store, root.join("many")) == set(paths[5:])


def test_rename_file(store_root: StoreRoot) -> None:
    store, root = store_root
    source, dest = root.join("_temporary", "part-0"), root.join("final", "part-0")
    store.write_bytes(source, b"payload")
    store.rename_file(source, dest)
    assert store.get_status(source) is None
    assert store.read_bytes(dest) == b"payload"
    with pytest.raises(FileNotFoundInStoreError):
        store.rename_file(source, root.join("elsewhere"))


def test_rename_file_replaces_destination(store_root: StoreRoot) -> None:
    store, root = store_root
    source, dest = root.join("new"), root.join("old")
    store.write_bytes(source, b"new")
    store.write_bytes(dest, b"old")
    store.rename_file(source, dest)
    assert store.read_bytes(dest) == b"new"
    assert listed(store, root) == {dest}


# Folders (stores with atomic_directory_rename) ----------------------------------------------------
@pytest.fixture
def folder_root(store_root: StoreRoot) -> StoreRoot:
    store, _ = store_root
    if not store.capabilities.atomic_directory_rename:
        pytest.skip(f"{type(store).__name__} has no folders to rename")
    return store_root


def test_directory_exists(folder_root: StoreRoot) -> None:
    store, root = folder_root
    store.write_bytes(root.join("full", "f"), b"x")
    store.prepare_directory(root.join("empty"))
    assert store.directory_exists(root.join("full")) and store.directory_exists(root.join("empty"))
    assert not store.directory_exists(root.join("full", "f")), "a file is no folder"
    assert not store.directory_exists(root.join("missing"))


def test_rename_directory_moves_a_folder_whole(folder_root: StoreRoot) -> None:
    store, root = folder_root
    for name in ("dataset1/a", "dataset1/sub/b", "dataset10/c"):
        store.write_bytes(root.join(name), name.encode())
    moved = root.join("new", "parents", "dataset1")
    store.rename_directory(root.join("dataset1"), moved)
    assert listed(store, root) == {moved.join("a"), moved.join("sub", "b"), root.join("dataset10", "c")}
    assert store.read_bytes(moved.join("sub", "b")) == b"dataset1/sub/b"
    assert not store.directory_exists(root.join("dataset1"))
    with pytest.raises(FileNotFoundInStoreError):
        store.rename_directory(root.join("dataset1"), root.join("elsewhere", "x"))
    assert not store.directory_exists(root.join("elsewhere")), "a rename that cannot happen makes no folder"


@pytest.mark.parametrize("occupant", ["folder", "empty folder", "file"])
def test_rename_directory_refuses_an_existing_destination(folder_root: StoreRoot, occupant: str) -> None:
    store, root = folder_root
    store.write_bytes(root.join("source", "a"), b"a")
    dest = root.join("dest")
    if occupant == "folder":
        store.write_bytes(dest.join("b"), b"b")
    elif occupant == "empty folder":
        store.prepare_directory(dest)
    else:
        store.write_bytes(dest, b"b")
    before = listed(store, root)
    with pytest.raises(FileAlreadyExistsError):
        store.rename_directory(root.join("source"), dest)
    assert listed(store, root) == before


def test_exchange_directories_swaps_two_folders_or_changes_nothing(folder_root: StoreRoot) -> None:
    store, root = folder_root
    first, second = root.join("first"), root.join("second")
    store.write_bytes(first.join("one"), b"1")
    store.write_bytes(second.join("two", "deep"), b"2")
    exchanged = store.exchange_directories(first, second)
    assert exchanged is store.capabilities.atomic_directory_exchange, "a filesystem here takes it"
    if exchanged:
        assert listed(store, root) == {first.join("two", "deep"), second.join("one")}
    else:
        assert listed(store, root) == {first.join("one"), second.join("two", "deep")}


# Write streams ---------------------------------------------------------------------------------
def test_open_write_publishes_only_on_close(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("streamed", "part-0.parquet")
    with store.open_write(path) as stream:
        stream.write(b"abc")
        stream.write(b"def")
        assert store.get_status(path) is None
        assert listed(store, root) == set()
    assert store.read_bytes(path) == b"abcdef"
    assert listed(store, root) == {path}


def test_open_write_publishes_nothing_on_exception(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("failed", "part-0")

    def failing_task() -> None:
        with store.open_write(path) as stream:
            stream.write(b"partial")
            raise RuntimeError("task failed")

    with pytest.raises(RuntimeError, match="task failed"):
        failing_task()
    assert store.get_status(path) is None
    assert listed(store, root) == set()


def test_open_write_discard_publishes_nothing(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("discarded")
    stream = store.open_write(path)
    stream.write(b"partial")
    stream.discard()  # type: ignore[attr-defined]
    assert store.get_status(path) is None


def test_unclosed_stream_is_not_published_when_collected(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("abandoned")
    stream = store.open_write(path)
    stream.write(b"partial")
    del stream
    gc.collect()
    assert store.get_status(path) is None


def test_open_write_overwrites(store_root: StoreRoot) -> None:
    store, root = store_root
    path = root.join("file")
    store.write_bytes(path, b"old")
    with store.open_write(path) as stream:
        stream.write(b"new")
    assert store.read_bytes(path) == b"new"


@pytest.mark.parametrize("name", SPECIAL_NAMES)
def test_special_characters_in_paths(store_root: StoreRoot, name: str) -> None:
    store, root = store_root
    path = root.join(name)
    store.write_bytes(path, name.encode())
    assert store.read_bytes(path) == name.encode()
    assert listed(store, root) == {path}
    reparsed = StorePath.from_uri(path.uri())
    assert reparsed == path
    assert store.get_status(reparsed) is not None
    moved = root.join("moved", name)
    store.rename_file(path, moved)
    assert store.read_bytes(moved) == name.encode()
    assert store.delete_tree(root) == 1


# Multipart uploads -----------------------------------------------------------------------------
@pytest.fixture
def multipart_root(store_root: StoreRoot) -> StoreRoot:
    store, _ = store_root
    if not store.capabilities.multipart_upload:
        pytest.skip(f"{type(store).__name__} has no multipart uploads")
    return store_root


def test_multipart_upload_complete(multipart_root: StoreRoot) -> None:
    store, root = multipart_root
    path = root.join("dataset1", "part-0")
    first, last = b"a" * MIN_PART, b"tail"
    upload_id = store.create_multipart_upload(path)
    etags = [store.upload_part(path, upload_id, 1, first), store.upload_part(path, upload_id, 2, last)]
    assert store.get_status(path) is None
    assert listed(store, root) == set()  # pending uploads are invisible
    etag = store.complete_multipart_upload(path, upload_id, etags)
    assert etag
    assert store.read_bytes(path) == first + last
    assert listed(store, root) == {path}
    assert list(store.list_multipart_uploads(root)) == []


def test_list_multipart_uploads_respects_directory_boundary(multipart_root: StoreRoot) -> None:
    store, root = multipart_root
    mine = root.join("dataset1", "sub", "part-0")
    other = root.join("dataset10", "part-0")
    before = time.time()
    mine_id = store.create_multipart_upload(mine)
    other_id = store.create_multipart_upload(other)
    pending = list(store.list_multipart_uploads(root.join("dataset1")))
    assert [(p.path, p.upload_id) for p in pending] == [(mine, mine_id)]
    assert before - 5 <= pending[0].initiated <= time.time() + 5
    everything = {(p.path, p.upload_id) for p in store.list_multipart_uploads(root)}
    assert everything == {(mine, mine_id), (other, other_id)}
    assert list(store.list_multipart_uploads(root.join("elsewhere"))) == []


def test_abort_multipart_upload(multipart_root: StoreRoot) -> None:
    store, root = multipart_root
    path = root.join("aborted")
    upload_id = store.create_multipart_upload(path)
    etag = store.upload_part(path, upload_id, 1, b"data")
    store.abort_multipart_upload(path, upload_id)
    assert list(store.list_multipart_uploads(root)) == []
    assert store.get_status(path) is None
    abort_gone_upload(store, path, upload_id)
    with pytest.raises(NoSuchUploadError):
        store.complete_multipart_upload(path, upload_id, [etag])
    with pytest.raises(NoSuchUploadError):
        store.list_parts(path, upload_id)
    assert store.get_status(path) is None


def test_abort_after_complete_raises_and_keeps_the_file(multipart_root: StoreRoot) -> None:
    store, root = multipart_root
    path = root.join("completed")
    upload_id = store.create_multipart_upload(path)
    store.complete_multipart_upload(path, upload_id, [store.upload_part(path, upload_id, 1, b"kept")])
    abort_gone_upload(store, path, upload_id)
    assert store.read_bytes(path) == b"kept"
    assert list(store.list_multipart_uploads(root)) == []


def abort_gone_upload(store: Store, path: StorePath, upload_id: str) -> None:
    """Aborting a gone upload is harmless: NoSuchUploadError where the store says so (AWS, local),
    a silent return where it answers 204 as for a live one (SeaweedFS); one request either way."""
    before = store.statistics.snapshot().get("op_multipart_abort", 0)
    if path.is_local:
        with pytest.raises(NoSuchUploadError):
            store.abort_multipart_upload(path, upload_id)
    else:
        with contextlib.suppress(NoSuchUploadError):
            store.abort_multipart_upload(path, upload_id)
    assert store.statistics.snapshot().get("op_multipart_abort", 0) == before + 1


def test_list_parts(multipart_root: StoreRoot) -> None:
    store, root = multipart_root
    path = root.join("parts")
    upload_id = store.create_multipart_upload(path)
    assert store.list_parts(path, upload_id) == []
    etags = [store.upload_part(path, upload_id, n, bytes([n]) * n) for n in (1, 2, 3)]
    parts = sorted(store.list_parts(path, upload_id), key=lambda part: part.number)
    assert [(p.number, p.etag, p.size) for p in parts] == [
        (1, etags[0], 1),
        (2, etags[1], 2),
        (3, etags[2], 3),
    ]
    store.abort_multipart_upload(path, upload_id)


# S3 only ---------------------------------------------------------------------------------------
def test_s3_counts_requests(s3_store: Store, s3_bucket: str) -> None:
    root = StorePath("s3", s3_bucket, "stats")
    s3_store.write_bytes(root.join("a"), b"12345")
    s3_store.read_bytes(root.join("a"))
    s3_store.get_status(root.join("a"))
    list(s3_store.list_files(root))
    s3_store.rename_file(root.join("a"), root.join("b"))
    assert s3_store.statistics.snapshot() == {
        "op_put": 1,
        "bytes_uploaded": 5,
        "op_get": 1,
        "op_head": 2,  # get_status, then rename's own HEAD
        "op_list": 1,
        "op_copy": 1,
        "bytes_copied": 5,
        "op_delete": 1,
    }


def test_s3_listings_follow_every_page(s3_store: Store, s3_bucket: str) -> None:
    s3_store.list_page_size = 2  # type: ignore[attr-defined]
    root = StorePath("s3", s3_bucket, "paged")
    files = {root.join("dataset1", f"f{i}") for i in range(5)}
    for path in files | {root.join("dataset10", "other")}:
        s3_store.write_bytes(path, b"x")
    assert listed(s3_store, root.join("dataset1")) == files
    assert s3_store.statistics.snapshot()["op_list"] == 3
    uploads = {(path, s3_store.create_multipart_upload(path)) for path in files for _ in range(2)}
    pending = {(p.path, p.upload_id) for p in s3_store.list_multipart_uploads(root.join("dataset1"))}
    assert pending == uploads
    path, upload_id = next(iter(uploads))
    etags = [s3_store.upload_part(path, upload_id, n, b"x") for n in range(1, 6)]
    assert [part.etag for part in s3_store.list_parts(path, upload_id)] == etags


def test_s3_list_page_is_one_request_up_to_1000_keys(s3_store: Store, s3_bucket: str) -> None:
    root = StorePath("s3", s3_bucket, "paged")
    for i in range(5):
        s3_store.write_bytes(root.join(f"f{i}"), b"x")
    before = s3_store.statistics.snapshot().get("op_list", 0)
    assert [s.path.name for s in s3_store.list_page(root, limit=2, after="f0")] == ["f1", "f2"]
    assert s3_store.statistics.snapshot()["op_list"] == before + 1
    s3_store.list_page_size = 2  # type: ignore[attr-defined]  # pages of 2 keys: continued to the limit
    assert [s.path.name for s in s3_store.list_page(root, limit=3, after="f0")] == ["f1", "f2", "f3"]
    assert s3_store.statistics.snapshot()["op_list"] == before + 3


def test_s3_delete_files_batches_by_1000(s3_store: Store, s3_bucket: str) -> None:
    paths = [StorePath("s3", s3_bucket, f"never-written/{i}") for i in range(1001)]
    s3_store.delete_files(paths)
    assert s3_store.statistics.snapshot()["op_delete"] == 2


def test_s3_large_stream_becomes_multipart_upload(s3_store: Store, s3_bucket: str) -> None:
    s3_store.multipart_threshold = MIN_PART  # type: ignore[attr-defined]
    s3_store.part_size = MIN_PART  # type: ignore[attr-defined]
    path = StorePath("s3", s3_bucket, "big")
    data = bytes(range(256)) * (MIN_PART * 2 // 256) + b"tail"
    with s3_store.open_write(path) as stream:
        for start in range(0, len(data), 1 << 20):
            stream.write(data[start : start + (1 << 20)])
    assert s3_store.read_bytes(path) == data
    stats = s3_store.statistics.snapshot()
    assert (stats["op_multipart_initiate"], stats["op_multipart_part"], stats["op_multipart_complete"]) == (
        1,
        3,
        1,
    )
    assert stats.get("op_put", 0) == 0


def test_s3_client_is_shared_across_threads(s3_store: Store, s3_bucket: str) -> None:
    root = StorePath("s3", s3_bucket, "threads")
    threads = [
        threading.Thread(target=s3_store.write_bytes, args=(root.join(f"f{i}"), b"x")) for i in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(listed(s3_store, root)) == 16


def test_s3_errors_name_url_and_code(s3_store: Store, embedded_s3: object) -> None:
    path = StorePath("s3", "no-such-bucket-here", "key")
    with pytest.raises(StoreError) as caught:
        list(s3_store.list_files(path))
    assert "s3://no-such-bucket-here/key" in str(caught.value)
    assert "NoSuchBucket" in str(caught.value)


def test_s3_repr_hides_secrets(embedded_s3: object) -> None:
    store = embedded_s3.store()  # type: ignore[attr-defined]
    assert embedded_s3.secret_key not in repr(store)  # type: ignore[attr-defined]
    assert embedded_s3.secret_key not in repr(embedded_s3)  # type: ignore[attr-defined]


def test_s3_missing_credentials_error_is_clear(
    embedded_s3: object, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = open_store(f"s3://{s3_bucket}/", endpoint_url=embedded_s3.endpoint_url)  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="AWS_ACCESS_KEY_ID"):
        store.read_bytes(StorePath("s3", s3_bucket, "key"))


def test_s3_endpoint_from_environment(
    embedded_s3: object, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in embedded_s3.env().items():  # type: ignore[attr-defined]
        monkeypatch.setenv(name, value)
    store = open_store(f"s3a://{s3_bucket}/env")
    path = StorePath.parse(f"s3a://{s3_bucket}/env/file")
    store.write_bytes(path, b"via env")
    assert [status.path for status in store.list_files(path.parent)] == [path]
    store.close()


# Request paths of the hot calls -------------------------------------------------------------------
HOT_KEYS = [*SPECIAL_NAMES, "reports %41.bin", "a#b?q=1&x=+.bin", "tilde~/(paren)*.bin"]


def _hot_call_outcomes(store: Store, root: StorePath) -> list[str]:
    """What each hot call did, in words, so two request paths can be compared exactly."""
    outcomes = []
    for name in HOT_KEYS:
        path = root.join(name)
        upload_id = store.create_multipart_upload(path)
        first = store.upload_part(path, upload_id, 1, b"a" * MIN_PART)
        second = store.upload_part(path, upload_id, 2, b"b")
        with pytest.raises(StoreError) as wrong_etag:
            store.complete_multipart_upload(path, upload_id, [first, '"0123"'])
        outcomes.append(
            f"{name}: wrong ETag -> {type(wrong_etag.value).__name__} {'InvalidPart' in str(wrong_etag.value)}"
        )
        etag = store.complete_multipart_upload(path, upload_id, [first, second])
        data = store.read_bytes(path)
        outcomes.append(f"{name}: completed {bool(etag)} {len(data)} {data[-1:]!r}")
        store.write_bytes(root.join(name + ".put"), b"once", if_absent=True)
        with pytest.raises(FileAlreadyExistsError):
            store.write_bytes(root.join(name + ".put"), b"twice", if_absent=True)
        outcomes.append(f"{name}: put {store.read_bytes(root.join(name + '.put'))!r}")
        doomed = store.create_multipart_upload(root.join(name + ".aborted"))
        store.abort_multipart_upload(root.join(name + ".aborted"), doomed)
    outcomes.append(f"listed {sorted(p.key for p in listed(store, root))}")
    outcomes.append(f"pending {list(store.list_multipart_uploads(root))}")
    return outcomes


@pytest.mark.s3
def test_request_paths_agree_on_keys_results_and_errors(embedded_s3: object, s3_bucket: str) -> None:
    """The same calls give the same keys, bytes, ETags and errors through the CRT and boto3."""
    pytest.importorskip("awscrt")
    outcomes = {}
    for path in REQUEST_PATHS:
        store = embedded_s3.store(request_path=path)  # type: ignore[attr-defined]
        try:
            root = StorePath("s3", s3_bucket, f"paths/{path}")
            outcomes[path] = [line.replace(f"paths/{path}/", "") for line in _hot_call_outcomes(store, root)]
            assert store.hot.name == path
        finally:
            store.close()
    assert outcomes["crt"] == outcomes["boto3"]
    wrong_etag = [line for line in outcomes["crt"] if "wrong ETag" in line]
    assert len(wrong_etag) == len(HOT_KEYS) and all(line.endswith("StoreError True") for line in wrong_etag)


def test_request_path_is_chosen_by_argument_then_environment() -> None:
    from airflow_commit_provider.core.store.s3 import S3Store

    assert chosen_request_path(None, {}) == "auto"
    assert chosen_request_path(None, {REQUEST_PATH_ENV: " BOTO3 "}) == "boto3"
    assert chosen_request_path("crt", {REQUEST_PATH_ENV: "boto3"}) == "crt"
    with pytest.raises(StoreError, match=r"request_path='http2'.*auto, crt, boto3"):
        chosen_request_path("http2", {})
    with pytest.raises(StoreError, match=REQUEST_PATH_ENV):
        chosen_request_path(None, {REQUEST_PATH_ENV: "fast"})
    with pytest.raises(StoreError, match="request_path='fast'"):
        S3Store(request_path="fast")
    assert S3Store(client=object(), request_path="crt").request_path == "boto3"
    from airflow_commit_provider.spark.config import CONF_S3_REQUEST_PATH
    from airflow_commit_provider.spark.write_options import resolve_s3_settings

    # A write's option, else the Spark conf, reaches the executors' stores and their environment.
    for options, conf in (({"s3.request_path": "boto3"}, {}), ({}, {CONF_S3_REQUEST_PATH: "boto3"})):
        settings = resolve_s3_settings(options, conf, {})
        assert S3Store(**settings.store_kwargs()).request_path == "boto3"
        assert settings.environment()[REQUEST_PATH_ENV] == "boto3"


@pytest.mark.s3
def test_a_child_forked_after_the_crt_started_uses_boto3(embedded_s3: object, s3_bucket: str) -> None:
    """The CRT does not survive a fork (children using it crashed): a forked child's stores, new
    and inherited, send their hot calls through boto3, and the parent's CRT path goes on working."""
    import multiprocessing

    pytest.importorskip("awscrt")
    store = embedded_s3.store(request_path="crt")  # type: ignore[attr-defined]
    root = StorePath("s3", s3_bucket, "fork")
    store.write_bytes(root.join("parent"), b"p")
    assert store.hot.name == "crt"
    paths_seen = multiprocessing.get_context("fork").SimpleQueue()

    def child() -> None:
        fresh = embedded_s3.store(request_path="crt")  # type: ignore[attr-defined]
        for name, used in (("inherited", store), ("fresh", fresh)):
            used.write_bytes(root.join(name), name.encode())
            upload = used.create_multipart_upload(root.join(f"{name}.mpu"))
            used.complete_multipart_upload(
                root.join(f"{name}.mpu"),
                upload,
                [used.upload_part(root.join(f"{name}.mpu"), upload, 1, b"m")],
            )
            paths_seen.put(used.hot.name)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(120)
    try:
        assert process.exitcode == 0, f"child exit code {process.exitcode}"
        assert [paths_seen.get(), paths_seen.get()] == ["boto3", "boto3"]
        assert [
            store.read_bytes(root.join(n)) for n in ("inherited", "fresh", "inherited.mpu", "fresh.mpu")
        ] == [b"inherited", b"fresh", b"m", b"m"]
        store.write_bytes(root.join("parent-again"), b"p")
        assert store.hot.name == "crt"
    finally:
        if process.is_alive():
            process.kill()
        store.close()


@pytest.mark.s3
def test_crt_threads_enter_python_with_one_lasting_thread_state(
    embedded_s3: object, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CRT thread keeps its Python thread state between callbacks (a new one per callback mapped
    and unmapped a frame stack each time): a thread-local set in one callback is there in the next."""
    pytest.importorskip("awscrt")
    import threading

    from airflow_commit_provider.core.store import s3_crt

    local = threading.local()
    visits: list[tuple[int, int]] = []
    keep = s3_crt._keep_thread_state

    def counting() -> None:
        keep()
        local.count = getattr(local, "count", 0) + 1
        visits.append((threading.get_ident(), local.count))

    monkeypatch.setattr(s3_crt, "_keep_thread_state", counting)
    store = embedded_s3.store(request_path="crt")  # type: ignore[attr-defined]
    try:
        root = StorePath("s3", s3_bucket, "thread-state")
        for index in range(12):
            store.write_bytes(root.join(str(index)), b"x")
            assert store.read_bytes(root.join(str(index))) == b"x"
    finally:
        store.close()
    threads = {ident for ident, _ in visits}
    assert len(visits) == 24 and threading.get_ident() not in threads
    for ident in threads:
        counts = [count for thread, count in visits if thread == ident]
        assert counts == list(range(1, len(counts) + 1)), f"thread {ident} lost its state: {counts}"


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-23T15:24:08.000Z",
        "2026-11-23T15:24:08Z",
        "2026-11-23T15:24:08.123456789Z",  # more than microseconds: botocore's parser
        "Mon, 23 Nov 2026 15:24:08 GMT",  # an HTTP date (HeadObject): botocore's parser
        "2026-11-23T15:24:08+01:00",
    ],
)
def test_s3_timestamps_read_as_botocore_reads_them(text: str) -> None:
    """The store's fast timestamp parser (listings) gives exactly botocore's instants."""
    import botocore.utils

    from airflow_commit_provider.core.store.s3 import parse_timestamp

    assert parse_timestamp(text) == botocore.utils.parse_timestamp(text)
    assert parse_timestamp(text).utcoffset() is not None
