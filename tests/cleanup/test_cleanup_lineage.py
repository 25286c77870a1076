"""OpenLineage of the cleanups: DROP names what was removed, never the table the cleanup ran in.

Marquez soft-deletes a dataset it sees dropped, so a DROP named after a table would hide a live
table after each hourly cleanup. The example DAG runs with the real OpenLineage provider and its
file transport (tests/support/openlineage.py); the cap is checked on the datasets the provider
gets from the operator, in the form the transport writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cleanup_support import ExampleDagRun, keys_under, write_files
from openlineage.client.serde import Serde
from support.openlineage import lineage_events

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.lineage import DROPPED_DATASETS
from airflow_commit_provider.operators import CleanupTemporaryOperator

TASKS = ("abort_stale_uploads", "clean_stale_temp_trees", "prune_commit_records")


def _statistics(dataset: dict[str, Any]) -> tuple[int | None, int | None]:
    statistics = dataset["inputFacets"]["inputStatistics"]
    return statistics.get("fileCount"), statistics.get("size")


@pytest.mark.s3
@pytest.mark.airflow
@pytest.mark.slow
def test_dropped_datasets_are_the_removed_areas_never_the_table(example_dag_run: ExampleDagRun) -> None:
    """out/dataset1 and out/dataset10 hold the same leftovers (five temporary trees, an upload, a
    committed job's records) and out/dataset1 one more upload; only out/dataset1 is a root of the
    example DAG's run (conftest.py's `example_dag_run`, shared with the example-DAG test)."""
    run, store, s3_bucket = example_dag_run.run, example_dag_run.store, example_dag_run.bucket
    neighbour = example_dag_run.path("out/dataset10")
    assert run.state == "success"
    assert keys_under(store, neighbour) == example_dag_run.outside["out/dataset10"]
    assert len(list(store.list_multipart_uploads(neighbour))) == 1

    index = example_dag_run.map_index["out/dataset1"]
    events = {task_id: lineage_events(run.run_id, task_id, index) for task_id in TASKS}
    datasets = [d for by_type in events.values() for event in by_type.values() for d in event["inputs"]]
    assert {d["namespace"] for d in datasets} == {f"s3://{s3_bucket}"}
    assert all(d["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP" for d in datasets)
    assert all(
        d["facets"]["lifecycleStateChange"]["previousIdentifier"]["name"] == d["name"] for d in datasets
    )
    names = [d["name"] for d in datasets]
    assert "out/dataset1" not in names, "the table is never reported dropped"
    assert all(name.startswith("out/dataset1/") for name in names), "nothing of out/dataset10"

    completed = {task_id: events[task_id]["COMPLETE"]["inputs"] for task_id in TASKS}
    [uploads] = completed["abort_stale_uploads"]
    assert uploads["name"] == "out/dataset1/_pending_uploads"
    assert uploads["inputFacets"]["subset"]["inputCondition"]["locations"] == [
        "out/dataset1/day=1/part-0",
        "out/dataset1/day=2/part-1",
    ]
    assert _statistics(uploads) == (2, 3000)

    trees = {d["name"]: d for d in completed["clean_stale_temp_trees"]}
    assert sorted(trees) == [
        "out/dataset1/.spark-staging-s",
        "out/dataset1/__magic_job-m",
        "out/dataset1/_temporary",  # the file loose in it, not the job trees below it
        "out/dataset1/_temporary/j1",
        "out/dataset1/_temporary/j2",
    ]
    assert {_statistics(tree) for tree in trees.values()} == {(1, 10)}, "one 10-byte file each"
    assert not any("subset" in tree["inputFacets"] for tree in trees.values())

    [records] = completed["prune_commit_records"]
    assert records["name"] == "out/dataset1/_airflow_commit"
    locations = records["inputFacets"]["subset"]["inputCondition"]["locations"]
    job_files = (
        "out/dataset1/_airflow_commit/job-dataset1.",
        "out/dataset1/_airflow_commit/job-dataset1/files-",
    )
    assert locations and all(
        name.startswith(job_files) or name.endswith("-job-dataset1.json") for name in locations
    ), "the job's outcome, record, file list and index entry"
    assert _statistics(records)[0] == len(locations)


def test_many_trees_are_capped_and_the_rest_summed(tmp_path: Path) -> None:
    store, root = LocalStore(), StorePath.parse(str(tmp_path / "out" / "dataset1"))
    count = DROPPED_DATASETS + 5
    write_files(store, root, [f".spark-staging-{i:03d}/f" for i in range(count)] + ["data/part-0"])
    op = CleanupTemporaryOperator(task_id="clean", scope=root.key, older_than="0s", aws_conn_id=None)

    op.execute(context={})
    datasets = [Serde.to_dict(d) for d in op.get_openlineage_facets_on_complete(None).inputs]
    json.dumps(datasets)  # as the transport writes them
    assert len(datasets) == DROPPED_DATASETS
    named, other = datasets[:-1], datasets[-1]
    assert [d["name"] for d in named] == [f"{root.key}/.spark-staging-{i:03d}" for i in range(len(named))]
    assert other["name"] == f"{root.key}/_other_temporary_trees"
    assert other["inputFacets"]["subset"]["inputCondition"]["locations"] == [
        f"{root.key}/.spark-staging-{i:03d}" for i in range(len(named), count)
    ]
    assert _statistics(other) == (6, 60)
    assert root.key not in {d["name"] for d in datasets}
    assert keys_under(store, root) == {"data/part-0"}


def test_a_dry_run_drops_nothing(tmp_path: Path) -> None:
    store, root = LocalStore(), StorePath.parse(str(tmp_path / "table"))
    write_files(store, root, ["_temporary/j/00/f"])
    op = CleanupTemporaryOperator(task_id="clean", scope=root.key, older_than="0s", dry_run=True)
    assert op.execute(context={})["would_delete"] == 1
    assert op.get_openlineage_facets_on_complete(None).inputs == []
