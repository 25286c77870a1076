"""Fixtures shared by the whole suite.

One embedded SeaweedFS serves every S3 test in a session; it starts only when the first test
that needs S3 asks for it, so local-only runs never pay its start-up time. `store_root` runs a
test once per store, which is how the store contract is checked on both.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.core.store.s3 import S3Store
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
    from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
    from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
    from airflow_commit_provider.devtools.postgres import Postgres


def hadoop_peers_runnable() -> bool:
    """Whether Hadoop's own committers can run here: their pinned jars (``devtools.hadoop_jars``) are
    built for the Hadoop inside the newest PySpark, so an older PySpark (the compatibility run's
    4.0 bundles Hadoop 3.4.1) runs without them and its run deselects ``-m hadoop_peers``."""
    from airflow_commit_provider.devtools.hadoop_jars import HADOOP_VERSION, bundled_hadoop_version

    return bundled_hadoop_version() == HADOOP_VERSION


def pytest_configure(config: pytest.Config) -> None:
    """A SIGTERM'd session (a CI runner's timeout, a `kill`) unwinds as on Ctrl-C: the session
    fixtures then stop their servers, which would otherwise outlive it (`interrupt_on_sigterm`)."""
    from airflow_commit_provider.devtools.processes import interrupt_on_sigterm

    interrupt_on_sigterm()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A Hadoop peer test selected where the peers cannot run fails, it never skips."""
    if item.get_closest_marker("hadoop_peers") and not hadoop_peers_runnable():
        from airflow_commit_provider.devtools.hadoop_jars import HADOOP_VERSION, bundled_hadoop_version

        pytest.fail(
            f"PySpark bundles Hadoop {bundled_hadoop_version()}, the peer jars are for Hadoop {HADOOP_VERSION}: "
            "deselect with -m 'not hadoop_peers' (make compat does) or update devtools/hadoop_jars.py"
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the embedded server `s3`, and every test that uses the Hadoop
    cluster `hadoop_cluster`, so `-m "not s3"` or `-m "not hadoop_cluster"` runs without it."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "embedded_s3" in fixtures:
            item.add_marker(pytest.mark.s3)
        if "hadoop_cluster" in fixtures:
            item.add_marker(pytest.mark.hadoop_cluster)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one local Spark session of the suite (tests/spark/conftest.py says why it is set so).

    Every test that runs Spark in this process takes it: PySpark starts one JVM per process, so a
    session built elsewhere without Hadoop's jars would leave them off the classpath for good.
    """
    # Python workers must run this interpreter (it has pyarrow and this package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf
    from airflow_commit_provider.devtools.hive_metastore import embedded_metastore_conf

    with_peers = hadoop_peers_runnable()
    # Hive support with an embedded Derby metastore of this test session's own (tests/spark/test_tables.py).
    catalog_dir = tmp_path_factory.mktemp("hive")
    builder = SparkSession.builder.master("local[2,4]").config(map=embedded_metastore_conf(catalog_dir))
    if with_peers:
        builder = builder.config(map=peer_spark_conf(peer_jars(), tmp_path_factory.mktemp("hadoop-local")))
    session = (
        builder.appName("airflow-commit-provider-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.task.maxFailures", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
        .config("spark.python.task.killTimeout", "100ms")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    classpath = session.sparkContext._jvm.java.lang.System.getProperty("java.class.path")  # type: ignore[union-attr]
    if with_peers and "hadoop-aws" not in classpath:
        pytest.fail(
            "this process's JVM was started without Hadoop's jars: a test built its own session first"
        )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def embedded_s3() -> Iterator[EmbeddedS3]:
    """One SeaweedFS server for the session, always stopped at the end."""
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

    with EmbeddedS3() as server:
        yield server


@pytest.fixture(scope="session")
def hadoop_cluster() -> Iterator[HadoopCluster]:
    """One YARN + HDFS cluster (devtools/hadoop_cluster.py) for the session, started by the first
    test that asks for it (about 15-30 s, 450 MB) and always stopped at the end; then checked to
    leave nothing behind (an error at the teardown of the last test that used it): no process of
    its group, no directory, `stop()` idempotent. Checked here rather than on a second cluster of
    a test's own, whose start alone cost 25 s of the side lane, and after the session's
    applications rather than on an idle cluster."""
    from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster, HadoopClusterError

    cluster = HadoopCluster().start()
    pid, directory = cluster.pid, cluster.directory
    try:
        yield cluster
    finally:
        cluster.stop()
    assert pid is not None and directory is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not directory.exists(), f"the stopped Hadoop cluster left {directory}"
    assert not cluster.running
    with pytest.raises(HadoopClusterError, match="not started"):
        cluster.conf_dir  # noqa: B018
    cluster.stop()  # idempotent


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One private PostgreSQL cluster for the session; each metastore gets a database of its own."""
    from airflow_commit_provider.devtools.postgres import Postgres

    with Postgres() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def metastore_service(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory, embedded_s3: EmbeddedS3
) -> Iterator[HiveMetastoreService]:
    """The session's one Thrift Hive metastore service (tests/support/metastore_service.py), in a
    database of the session's PostgreSQL cluster. Registered here, once: a session fixture imported
    into several test modules is cached per module, and each module started a metastore (a JVM and
    a schema) of its own."""
    from support.metastore_service import running_metastore_service

    with running_metastore_service(postgres, tmp_path_factory, embedded_s3) as service:
        yield service


@pytest.fixture
def s3_bucket(embedded_s3: EmbeddedS3) -> Iterator[str]:
    """A fresh, empty bucket, so tests never see each other's objects or uploads.

    It is deleted afterwards: each SeaweedFS bucket holds volumes of its own.
    """
    bucket = embedded_s3.create_bucket(f"test-{uuid.uuid4().hex[:20]}")
    yield bucket
    with contextlib.suppress(Exception):
        embedded_s3.delete_bucket(bucket)


@pytest.fixture
def s3_store(embedded_s3: EmbeddedS3) -> Iterator[S3Store]:
    """An S3Store on the embedded server, with statistics of its own."""
    store = embedded_s3.store()
    yield store
    store.close()


@pytest.fixture
def local_root(tmp_path: Path) -> StorePath:
    """A local directory that does not exist yet, inside the test's tmp_path."""
    return StorePath.parse(str(tmp_path / "store"))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_root(request: pytest.FixtureRequest) -> Iterator[tuple[Store, StorePath]]:
    """(store, root directory) for each store; the S3 one starts the embedded server lazily."""
    if request.param == "local":
        from airflow_commit_provider.core.store.local import LocalStore

        local = LocalStore()
        yield local, request.getfixturevalue("local_root")
        local.close()
    else:
        bucket = request.getfixturevalue("s3_bucket")
        yield request.getfixturevalue("s3_store"), StorePath("s3", bucket, "root")
