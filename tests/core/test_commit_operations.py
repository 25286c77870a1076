"""The one seam for S3's commit operations (`core.commit_operations`): the stages and
committers make no multipart call but through it, and its batches report what they did as values,
on the local store's multipart emulation and on the embedded S3 alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.faults import FaultInjectingStore, InjectedFault

import airflow_commit_provider.core.committers as committers_package
import airflow_commit_provider.core.stages as stages_package
from airflow_commit_provider.core.commit_operations import (
    CommitOperations,
    UploadGoneError,
    UploadToComplete,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from airflow_commit_provider.core.store.s3 import S3Store

#: The store's multipart calls (and whether it overlaps them): what only the seam may use.
MULTIPART_CALLS = frozenset(
    name
    for name in dir(Store)
    if "multipart" in name or name in {"upload_part", "list_parts", "pipelines_requests"}
)
SEAM_USERS = (Path(stages_package.__file__).parent, Path(committers_package.__file__).parent)


def multipart_calls_in(source: str, filename: str) -> list[str]:
    """`file:line name` of every attribute named like one of the store's multipart calls."""
    return [
        f"{filename}:{node.lineno} {node.attr}"
        for node in ast.walk(ast.parse(source, filename))
        if isinstance(node, ast.Attribute) and node.attr in MULTIPART_CALLS
    ]


def test_stages_and_committers_make_multipart_calls_only_through_the_seam() -> None:
    assert {"create_multipart_upload", "upload_part", "start_complete_multipart_upload"} <= MULTIPART_CALLS
    found = [
        call
        for package in SEAM_USERS
        for module in sorted(package.glob("*.py"))
        for call in multipart_calls_in(module.read_text(encoding="utf-8"), str(module))
    ]
    assert not found, "call these through ctx.operations (CommitOperations):\n" + "\n".join(found)


def test_the_source_check_finds_a_direct_call() -> None:
    source = "def f(ctx, dest):\n    return ctx.store.create_multipart_upload(dest)\n"
    assert multipart_calls_in(source, "magic.py") == ["magic.py:2 create_multipart_upload"]


def answers_repeats(store: Store) -> bool:
    """Whether the store answers a repeated complete or abort with success, as SeaweedFS does
    (the environment notes), rather than NoSuchUpload, as AWS and the local store do."""
    return isinstance(store, S3Store)


def _pending(operations: CommitOperations, path: StorePath, data: bytes) -> UploadToComplete:
    upload_id = operations.initiate(path)
    commit = operations.upload_to_pending(path, upload_id, [data])
    return UploadToComplete(path, upload_id, commit.etags, commit.length)


def test_a_completion_batch_reports_completed_recovered_and_failed(
    store_root: tuple[Store, StorePath],
) -> None:
    store, root = store_root
    operations = CommitOperations(store, threads=1)
    fresh, again, lost, untried = (
        _pending(operations, root.join(name), name.encode() * 10)
        for name in ("fresh", "again", "lost", "untried")
    )
    assert operations.complete_uploads([again]).checked().completed == 1
    operations.abort_uploads([(lost.path, lost.upload_id)]).checked()

    outcome = operations.complete_uploads([fresh, again, lost, untried])

    repeated = (outcome.recovered, outcome.completed - 1)  # SeaweedFS completes a completed upload again
    assert repeated == ((0, 1) if answers_repeats(store) else (1, 0)) and outcome.failed == 1
    assert outcome.completed_bytes == fresh.size + again.size
    (failure,) = outcome.failures
    assert (failure.path, failure.upload_id) == (lost.path, lost.upload_id)
    assert isinstance(failure.error, UploadGoneError) and str(lost.path) in str(failure.error)
    with pytest.raises(UploadGoneError, match="is gone and the destination is missing"):
        outcome.checked()
    # The batch stopped at its failure: the upload after it is still pending, nothing else is.
    assert store.read_bytes(fresh.path) == b"fresh" * 10 and store.read_bytes(again.path) == b"again" * 10
    assert store.get_status(lost.path) is None and store.get_status(untried.path) is None
    assert {(u.path, u.upload_id) for u in operations.list_pending(root)} == {
        (untried.path, untried.upload_id)
    }


@pytest.mark.parametrize("keep_going", [False, True])
def test_an_abort_batch_reports_each_outcome(store_root: tuple[Store, StorePath], keep_going: bool) -> None:
    store, root = store_root
    faulty = FaultInjectingStore(store)
    operations = CommitOperations(faulty, threads=1)
    uploads = [(path, operations.initiate(path)) for path in (root.join(f"f{number}") for number in range(4))]
    operations.abort_uploads(uploads[:1]).checked()
    failing = uploads[2]
    faulty.inject(when=lambda call: call.op == "abort_multipart_upload" and call.path == str(failing[0]))

    outcome = operations.abort_uploads(uploads, keep_going=keep_going)

    aborted = 2 if keep_going else 1
    expected = (0, aborted + 1) if answers_repeats(store) else (1, aborted)  # SeaweedFS aborts again
    assert (outcome.already_gone, outcome.aborted, outcome.failed) == (*expected, 1)
    (failure,) = outcome.failures
    assert (failure.path, failure.upload_id) == failing and isinstance(failure.error, InjectedFault)
    left = {failing, *(() if keep_going else uploads[3:])}
    assert {(u.path, u.upload_id) for u in operations.list_pending(root)} == left
    operations.abort_uploads(left).checked()
