"""Checks of the final store state: the correctness properties as assertions.

- committed: the visible files are exactly the expected ones with the expected bytes (complete
  and exclusive), `_SUCCESS` lists exactly the files this job committed, and nothing is left
  behind: no pending multipart upload, no temp object (`_temporary`, `__magic_job-*`,
  `.__uploads__`, hidden temp files);
- aborted: the destination holds only what was there before, no `_SUCCESS`, and again no
  pending upload and no temp object.

Files are compared by path relative to the destination; contents by bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from airflow_commit_provider.core.formats.success import SUCCESS_NAME, SuccessData
from airflow_commit_provider.core.layout import RECORD_KINDS, RECORDS_DIR, RECORDS_INDEX_DIR, SUCCESS_FILENAME
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store

TEMP_DIR_NAMES = ("_temporary", ".__uploads__")
MAGIC_DIR_PREFIX = "__magic_job-"


def store_files(store: Store, dest: StorePath) -> dict[str, bytes]:
    """Every file under `dest` (hidden ones included), by relative path, with its bytes."""
    return {status.path.relative_to(dest): store.read_bytes(status.path) for status in store.list_files(dest)}


def is_commit_record(relative: str) -> bool:
    """A durable record a commit leaves on purpose: a `_SUCCESS` (table or partition) or a job record."""
    parts = relative.split("/")
    return parts[-1] == SUCCESS_FILENAME or RECORDS_DIR in parts[:-1]


def is_temp(relative: str) -> bool:
    """A hidden path other than the commit records: commit machinery, never output."""
    if is_commit_record(relative):
        return False
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def split_records(files: dict[str, bytes]) -> dict[str, bytes]:
    """Remove the commit records from `files` and return them."""
    return {name: files.pop(name) for name in sorted(files) if is_commit_record(name)}


def pending_uploads(store: Store, dest: StorePath) -> list[str]:
    if not store.capabilities.multipart_upload:
        return []
    return sorted(f"{upload.path} ({upload.upload_id})" for upload in store.list_multipart_uploads(dest))


def temp_directories(dest: StorePath) -> list[str]:
    """Local only: commit-machinery directories left on disk, even empty ones."""
    if not dest.is_local or not os.path.isdir(dest.key):
        return []
    found = []
    for current, dirs, _files in os.walk(dest.key):
        for name in dirs:
            if name in TEMP_DIR_NAMES or name.startswith(MAGIC_DIR_PREFIX):
                found.append(os.path.join(current, name))
    return sorted(found)


def describe(files: Mapping[str, bytes]) -> dict[str, str]:
    return {
        name: (data[:60].decode("utf-8", "replace") + ("..." if len(data) > 60 else ""))
        for name, data in sorted(files.items())
    }


def assert_nothing_left_behind(store: Store, dest: StorePath, *, strict_dirs: bool = True) -> None:
    """No temp object, pending upload or temp directory anywhere under `dest` (`_SUCCESS` files are fine)."""
    files = store_files(store, dest)
    temp = sorted(name for name in files if is_temp(name))
    assert not temp, f"temp objects left under {dest}: {temp}"
    uploads = pending_uploads(store, dest)
    assert not uploads, f"pending multipart uploads left under {dest}: {uploads}"
    if strict_dirs:
        dirs = temp_directories(dest)
        assert not dirs, f"temp directories left under {dest}: {dirs}"


def read_success(store: Store, dest: StorePath) -> SuccessData:
    path = dest.join(SUCCESS_FILENAME)
    return SuccessData.from_bytes(store.read_bytes(path), str(path))


def assert_committed(
    store: Store,
    dest: StorePath,
    expected: Mapping[str, bytes],
    *,
    job_id: str | None = None,
    committed: Mapping[str, bytes] | None = None,
    strict_dirs: bool = True,
) -> SuccessData:
    """The job committed: visible == `expected`; `_SUCCESS` lists exactly `committed` (default: expected)."""
    committed = expected if committed is None else committed
    files = store_files(store, dest)
    records = split_records(files)
    success_bytes = records.get(SUCCESS_FILENAME)
    temp = sorted(name for name in files if is_temp(name))
    assert not temp, f"temp objects left under {dest}: {temp}"
    visible = {name: data for name, data in files.items() if not is_temp(name)}
    missing = sorted(set(expected) - set(visible))
    extra = sorted(set(visible) - set(expected))
    assert not missing, f"incomplete: committed files missing from {dest}: {missing}"
    assert not extra, f"not exclusive: unexpected files in {dest}: {describe({n: visible[n] for n in extra})}"
    wrong = sorted(name for name in expected if visible[name] != expected[name])
    assert not wrong, f"wrong contents in {dest}: " + "; ".join(
        f"{n}: got {describe({n: visible[n]})[n]!r}, want {describe({n: expected[n]})[n]!r}" for n in wrong
    )
    assert success_bytes is not None, f"no _SUCCESS in {dest}"
    success = SuccessData.from_bytes(success_bytes, str(dest.join(SUCCESS_FILENAME)))
    raw_name = json.loads(success_bytes)["name"]
    assert raw_name == SUCCESS_NAME
    assert success.success is True
    if job_id is not None:
        assert success.job_id == job_id, f"_SUCCESS is from job {success.job_id!r}, not {job_id!r}"
    assert success.files is None and success.file_list is not None, "_SUCCESS names no file list"
    listed: dict[str, int] = {}
    for entry in success.iter_all_files(store, dest):
        relative = StorePath.from_uri(entry.uri).relative_to(dest)
        assert relative not in listed, f"_SUCCESS lists {entry.uri} twice"
        listed[relative] = entry.size
    assert listed == {name: len(data) for name, data in committed.items()}, (
        f"_SUCCESS lists {sorted(listed)}, committed {sorted(committed)}"
    )
    assert success.file_count == len(committed)
    assert success.total_bytes == sum(len(data) for data in committed.values())
    assert_job_records(store, dest, records, success, committed)
    uploads = pending_uploads(store, dest)
    assert not uploads, f"pending multipart uploads left under {dest}: {uploads}"
    if strict_dirs:
        dirs = temp_directories(dest)
        assert not dirs, f"temp directories left under {dest}: {dirs}"
    return success


def assert_aborted(
    store: Store,
    dest: StorePath,
    preexisting: Mapping[str, bytes] | None = None,
    *,
    strict_dirs: bool = True,
) -> None:
    """Nothing of the job is visible or left behind: the destination is as it was before."""
    preexisting = dict(preexisting or {})
    files = store_files(store, dest)
    temp = sorted(name for name in files if is_temp(name) and name not in preexisting)
    assert not temp, f"temp objects left under {dest}: {temp}"
    records = split_records(files)
    new_markers = sorted(
        name for name in records if name not in preexisting and not name.startswith(RECORDS_DIR + "/")
    )
    assert not new_markers, f"aborted job left {new_markers} in {dest}"
    new_records = sorted(
        name
        for name in records
        if name not in preexisting
        and not name.endswith(RECORD_KINDS["outcome"])
        and not name.startswith(f"{RECORDS_DIR}/{RECORDS_INDEX_DIR}/")
    )
    assert not new_records, (
        f"aborted job left job records {new_records} (beyond its outcome and index entry) in {dest}"
    )
    files.update({name: data for name, data in records.items() if name in preexisting})
    visible = files
    extra = sorted(set(visible) - set(preexisting))
    assert not extra, f"aborted job left output in {dest}: {describe({n: visible[n] for n in extra})}"
    missing = sorted(set(preexisting) - set(visible))
    assert not missing, f"aborted job removed pre-existing files from {dest}: {missing}"
    changed = sorted(name for name in preexisting if visible[name] != preexisting[name])
    assert not changed, f"aborted job changed pre-existing files in {dest}: {changed}"
    uploads = pending_uploads(store, dest)
    assert not uploads, f"pending multipart uploads left under {dest}: {uploads}"
    if strict_dirs:
        dirs = temp_directories(dest)
        assert not dirs, f"temp directories left under {dest}: {dirs}"


def assert_job_records(
    store: Store,
    dest: StorePath,
    records: Mapping[str, bytes],
    success: SuccessData,
    committed: Mapping[str, bytes],
) -> None:
    """The job's durable record matches its `_SUCCESS` and names the same lists as its outcome; each
    partition `_SUCCESS` of the job vouches for exactly the job's files in that partition (its rows
    of the job's file list), and if the job wrote any, it wrote one per partition."""
    name = f"{RECORDS_DIR}/{success.job_id}{RECORD_KINDS['success']}"
    assert name in records, f"no job record {name} in {dest}"
    record = SuccessData.from_bytes(records[name], name)
    assert (
        record.job_id,
        record.file_count,
        record.total_bytes,
        record.file_list,
        record.partition_list,
    ) == (
        success.job_id,
        success.file_count,
        success.total_bytes,
        success.file_list,
        success.partition_list,
    ), f"job record {name} does not match _SUCCESS"
    outcome = json.loads(records[f"{RECORDS_DIR}/{success.job_id}{RECORD_KINDS['outcome']}"])
    assert outcome["decision"] == "commit", f"job {success.job_id} committed but its outcome is {outcome}"
    named = (outcome.get("fileList"), outcome.get("partitionList"))
    # An outcome from before the lists (an older release's driver that died after its commit point)
    # names none: the job commit that rolls it forward writes them, named by checksum in _SUCCESS.
    assert named == (None, None) or named == (
        success.file_list.to_json() if success.file_list else None,
        success.partition_list.to_json() if success.partition_list else None,
    ), f"job {success.job_id}: _SUCCESS names other lists than its outcome"
    by_partition: dict[str, dict[str, int]] = {}
    for relative, data in committed.items():
        if "/" in relative:
            by_partition.setdefault(relative.rsplit("/", 1)[0], {})[relative] = len(data)
    markers = {}
    for marker_name, data in records.items():
        if marker_name == SUCCESS_FILENAME or marker_name.startswith(RECORDS_DIR + "/"):
            continue
        marker = SuccessData.from_bytes(data, marker_name)
        if marker.job_id == success.job_id:
            directory = dest.join(marker_name).parent
            markers[marker_name.rsplit("/", 1)[0]] = {
                StorePath.from_uri(entry.uri).relative_to(dest): entry.size
                for entry in marker.iter_all_files(store, directory)
            }
    if markers:
        assert markers == by_partition, f"partition _SUCCESS files list {markers}, committed {by_partition}"
