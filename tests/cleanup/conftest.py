"""Airflow settings for the cleanup tests, and an AWS connection to the embedded S3.

Airflow reads its configuration when first imported, so the environment is set when this
conftest is imported. `setdefault`: when the whole suite runs, tests/airflow/conftest.py has
already chosen a home, DAG folder and database, and these tests simply use those.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.openlineage import openlineage_file_transport

from airflow_commit_provider.core.paths import StorePath

if TYPE_CHECKING:
    from cleanup_support import ExampleDagRun

    from airflow_commit_provider.core.store.s3 import S3Store
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

REPO = Path(__file__).resolve().parents[2]
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-home-cleanup-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], True)
_HOME = os.environ["AIRFLOW_HOME"]
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags_examples"))
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_HOME}/airflow.db")
for _name, _value in openlineage_file_transport(Path(_HOME)).items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def migrated_airflow_db() -> None:
    """`airflow db migrate` once per session, for the tests that run a DAG (idempotent)."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True, check=False
    )
    if result.returncode:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@pytest.fixture
def aws_test_conn(embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An Airflow AWS connection (id `aws_default`) to the embedded S3, from the environment."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)  # settings must come from the connection alone
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", embedded_s3.airflow_connection())
    yield "aws_default"


@pytest.fixture
def s3_env(embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """boto3's standard environment carries the credentials; the endpoint comes from --endpoint-url."""
    for name, value in embedded_s3.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return embedded_s3.endpoint_url


# Buckets ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def _emptied_buckets(embedded_s3: EmbeddedS3) -> Iterator[list[str]]:
    """Buckets the cleanup tests have used and emptied, for the next test to use; deleted at the end."""
    buckets: list[str] = []
    yield buckets
    for bucket in buckets:
        with contextlib.suppress(Exception):
            embedded_s3.delete_bucket(bucket)


def _empty(store: S3Store, bucket: str) -> None:
    """Abort every pending upload in `bucket` and delete every object."""
    root = StorePath("s3", bucket, "")
    for upload in list(store.list_multipart_uploads(root)):
        store.abort_multipart_upload(upload.path, upload.upload_id)
    store.delete_files([status.path for status in store.list_files(root)])


def _is_empty(store: S3Store, bucket: str) -> bool:
    root = StorePath("s3", bucket, "")
    return (
        next(iter(store.list_files(root)), None) is None
        and next(iter(store.list_multipart_uploads(root)), None) is None
    )


@pytest.fixture
def s3_bucket(embedded_s3: EmbeddedS3, _emptied_buckets: list[str]) -> Iterator[str]:
    """An empty bucket of the test's own, as tests/conftest.py's `s3_bucket` gives, but one a test
    before it used and emptied when there is one. On SeaweedFS a new bucket allocates volumes at
    its first write and deleting it frees them: 5-18 s a test on a loaded machine, more than most
    cleanup tests take. Emptied (every upload aborted, every object deleted) is what a test sees of
    a new bucket, and is checked again before the bucket is handed out."""
    store = embedded_s3.store()
    try:
        bucket = _emptied_buckets.pop() if _emptied_buckets else None
        if bucket is not None and not _is_empty(store, bucket):
            with contextlib.suppress(Exception):
                embedded_s3.delete_bucket(bucket)
            bucket = None
        if bucket is None:
            bucket = embedded_s3.create_bucket(f"test-{uuid.uuid4().hex[:20]}")
        yield bucket
        try:
            _empty(store, bucket)
        except Exception:
            with contextlib.suppress(Exception):
                embedded_s3.delete_bucket(bucket)
        else:
            _emptied_buckets.append(bucket)
    finally:
        store.close()


# The example DAG's one run ----------------------------------------------------------------------
DAG_FILE = REPO / "dags_examples" / "upload_cleanup.py"
#: What the lineage test leaves in out/dataset1 (and the same in out/dataset10, outside every root).
LINEAGE_TREES = (
    "_temporary/j1/00/f",
    "_temporary/j2/00/f",
    "_temporary/stray",
    "__magic_job-m/f",
    ".spark-staging-s/f",
)


@pytest.fixture(scope="session")
def example_dag_run(migrated_airflow_db: None, embedded_s3: EmbeddedS3) -> Iterator[ExampleDagRun]:
    """One `dag.test` of the hourly cleanup DAG, which the example-DAG test
    (test_cleanup_operators.py) and the lineage test (test_cleanup_lineage.py) both check: a run
    costs an Airflow DAG run of eleven tasks, so their two scenarios share it, each in roots of its
    own (`lake/t1`, `lake/t2`; `out/dataset1`), with a neighbour of each outside every root
    (`lake/t10`, `out/dataset10`). The roots come from the `commit_cleanup_roots` Variable; that a
    run's `roots` param wins over it is checked on the DAG's `table_roots` task
    (test_example_dag_imports). The connection and Variable are set for the run alone."""
    # Imported here: this conftest sets Airflow's environment before anything imports Airflow.
    from cleanup_support import ExampleDagRun, keys_under, start_upload, write_files
    from support.committed_jobs import commit, interrupt_after_commit_point

    from airflow_commit_provider.compat import dag_bag_class

    bucket = embedded_s3.create_bucket(f"dag-{uuid.uuid4().hex[:16]}")
    store = embedded_s3.store()
    roots = ["lake/t1", "lake/t2", "out/dataset1"]
    s3 = lambda key: StorePath("s3", bucket, key)  # noqa: E731

    # lake/*: the example-DAG test's (a committing job, an upload, a tree, a done job's records).
    start_upload(store, s3("lake/t1/day=1/part-0"), parts=2, size=1000)
    start_upload(store, s3("lake/t10/part-0"))
    write_files(store, s3("lake/t2"), ["_temporary/j/00/f", "data/f"])
    commit(store, s3("lake/t1"), "job-done")
    interrupt_after_commit_point(store, s3("lake/t1"), "job-committing")
    commit(store, s3("lake/t10"), "job-neighbour")
    # out/*: the lineage test's (the same leftovers in both: only the scope tells them apart).
    for root in (s3("out/dataset1"), s3("out/dataset10")):
        write_files(store, root, [*LINEAGE_TREES, "data/part-0"])
        start_upload(store, root.join("day=1/part-0"), parts=2, size=1000)
        commit(store, root, f"job-{root.name}")
    start_upload(store, s3("out/dataset1/day=2/part-1"), size=1000)
    outside = {key: keys_under(store, s3(key)) for key in ("lake/t10", "out/dataset10")}

    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("AWS_"):
                patch.delenv(name)  # settings must come from the connection alone
        patch.setenv("AIRFLOW_CONN_AWS_DEFAULT", embedded_s3.airflow_connection())
        patch.setenv("AIRFLOW_VAR_COMMIT_CLEANUP_ROOTS", json.dumps([f"s3://{bucket}/{r}" for r in roots]))
        dag = dag_bag_class()(dag_folder=str(DAG_FILE)).dags["upload_cleanup"]
        run = dag.test(
            run_conf={"older_than": "0s", "records_older_than": "0s", "records_max_job_duration": "0s"}
        )
    yield ExampleDagRun(run, store, bucket, {root: index for index, root in enumerate(roots)}, outside)
    store.close()
    with contextlib.suppress(Exception):
        embedded_s3.delete_bucket(bucket)
