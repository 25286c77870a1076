"""Whether a Spark job's destination holds exactly one copy of its rows and nothing else: the
checks of a job run by a real cluster (standalone or YARN), on any store of ours."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import RECORDS_DIR, SUCCESS_FILENAME
from airflow_commit_provider.core.paths import StorePath
from support.invariants import read_success

if TYPE_CHECKING:
    from airflow_commit_provider.core.store import Store


def relative_files(store: Store, destination: StorePath) -> list[str]:
    return sorted(s.path.relative_to(destination) for s in store.list_files(destination))


def is_hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def data_files(store: Store, destination: StorePath) -> list[str]:
    """What a reader sees: no `_`/`.`-prefixed path segment."""
    return [name for name in relative_files(store, destination) if not is_hidden(name)]


def read_ids(store: Store, destination: StorePath) -> list[int]:
    """Every ``id`` in the visible parquet files, sorted (duplicates kept)."""
    import pyarrow.parquet as pq

    ids: list[int] = []
    for name in data_files(store, destination):
        table = pq.read_table(io.BytesIO(store.read_bytes(destination.join(name))))
        ids += table.column("id").to_pylist()
    return sorted(ids)


def leftovers(store: Store, destination: StorePath) -> dict[str, list[str]]:
    """What must never remain: pending uploads (on a store that has them), temp trees, hidden
    objects other than the markers."""
    from airflow_commit_provider.cleanup import find_temp_trees

    hidden = [
        name
        for name in relative_files(store, destination)
        if is_hidden(name)
        and name.rsplit("/", 1)[-1] != SUCCESS_FILENAME
        and not name.startswith(f"{RECORDS_DIR}/")
    ]
    trees = find_temp_trees(store, destination, older_than=0, nested=True).trees
    uploads = store.list_multipart_uploads(destination) if store.capabilities.multipart_upload else ()
    return {
        "pending uploads": sorted(f"{u.path} ({u.upload_id})" for u in uploads),
        "temp trees": sorted(str(t.path) for t in trees),
        "hidden objects": hidden,
    }


def assert_one_copy(store: Store, destination: StorePath, rows: int, job_id: str) -> SuccessData:
    """Exactly one copy of rows 0..rows-1, committed by ``job_id``, and nothing left behind."""
    success = read_success(store, destination)
    assert success.job_id == job_id, f"_SUCCESS names job {success.job_id}, expected {job_id}"
    visible = data_files(store, destination)
    assert visible and all(job_id in name for name in visible), f"files of other jobs are visible: {visible}"
    assert sorted(name.rsplit("/", 1)[-1] for name in visible) == sorted(
        name.rsplit("/", 1)[-1] for name in success.filenames
    ), f"visible {visible} but _SUCCESS lists {success.filenames}"
    assert read_ids(store, destination) == list(range(rows)), "not exactly one copy of every row"
    assert leftovers(store, destination) == {"pending uploads": [], "temp trees": [], "hidden objects": []}
    return success
