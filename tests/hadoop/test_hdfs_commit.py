"""The rename committers run on HDFS (through WebHDFS, the test cluster), and the upload committers
refuse it at setup: a job through `core`, as the protocol tests run one on local files.

Cost: one job per committer (about 2-4 s each on the session's cluster); the refusals make no request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from support.hdfs import listed_counts, namespace_counts
from support.invariants import assert_committed, store_files
from support.workload import UPLOAD_COMMITTERS, JobRun, expected_output, make_options, task_files

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import UnsupportedStoreError
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

#: The committers that need no multipart uploads: they run on HDFS.
RENAME_COMMITTERS = ("manifest", "file-v1")


@pytest.fixture
def hdfs_dest(hadoop_cluster: HadoopCluster) -> Iterator[tuple[HdfsStore, StorePath]]:
    """A store on the minicluster and a fresh destination on it, removed afterwards."""
    store = HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url))
    root = StorePath.parse(f"{hadoop_cluster.fs_default_name}/jobs-{uuid.uuid4().hex[:12]}")
    yield store, root.join("out")
    store.delete_tree(root)
    store.close()


@pytest.mark.hadoop_cluster
@pytest.mark.parametrize("name", RENAME_COMMITTERS)
def test_rename_committer_commits_a_job_on_hdfs(
    hdfs_dest: tuple[HdfsStore, StorePath],
    hadoop_cluster: HadoopCluster,
    name: str,
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Complete and exclusive on HDFS: an aborted attempt adds nothing, the committed attempts'
    files are all there with their bytes, `_SUCCESS` lists them, and nothing unlisted is left (a
    hidden write in a `.__publishing__` folder, which listings skip, or an empty folder); the CLI's
    check of the `_SUCCESS` opens hdfs:// with the WebHDFS setting of its environment."""
    store, dest = hdfs_dest
    job = JobRun.create(name, store, dest, make_options(f"{tmp_path}/staging"))
    job.committer.setup_job()
    failed = job.attempt(0, 0, [*task_files(0), "dt=2024-01-09/only-in-failed-attempt.bin"])
    failed.handle.abort_task()
    attempts = [job.run_task(0, 1), job.run_task(1, 0), job.run_task(2, 0)]
    success = job.committer.commit_job([attempt.result for attempt in attempts])
    expected = expected_output(*attempts)
    written = assert_committed(store, dest, expected, job_id=job.job_id)
    assert success.file_count == len(expected) == 6
    assert namespace_counts(hadoop_cluster, dest) == listed_counts(store_files(store, dest))
    assert sorted(written.filenames) == sorted(dest.join(name).uri() for name in expected)
    verify = ["success", "verify", str(dest), "--committer", name, "--job-id", job.job_id, "--min-files", "6"]
    monkeypatch.setenv("AIRFLOW_COMMIT_WEBHDFS_URL", hadoop_cluster.webhdfs_url)
    assert main([*verify, "-o", "json"]) == 0, "the CLI opens hdfs:// and finds the job's _SUCCESS"
    assert main([*verify[:-1], "7"]) != 0, "and refuses one that falls short"


@pytest.mark.parametrize("name", UPLOAD_COMMITTERS)
def test_upload_committers_refuse_hdfs_at_setup(name: str) -> None:
    """No multipart uploads on HDFS: refused in one line naming the committer and the store, before
    any request (the store's address is never reached)."""
    store = HdfsStore(HdfsSettings(webhdfs_url="http://127.0.0.1:9"))
    with pytest.raises(UnsupportedStoreError) as refused:
        create_committer(name, store, StorePath.parse("hdfs://nn:8020/t"), uuid.uuid4().hex, make_options())
    assert str(refused.value) == (
        f"the {name} committer needs a store with multipart upload; HdfsStore does not provide it"
    )
    assert store.statistics.snapshot() == {}


def test_hdfs_destinations_are_named_as_openlineage_and_airflow_name_them() -> None:
    from airflow_commit_provider.assets import asset_uri
    from airflow_commit_provider.lineage import dataset_id

    assert dataset_id("hdfs://nn:8020/warehouse/events/") == ("hdfs://nn:8020", "/warehouse/events")
    assert asset_uri("hdfs://nn:8020/warehouse/events/") == "hdfs://nn:8020/warehouse/events"
