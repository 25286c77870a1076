"""The Spark tests' fixtures: the suite's Spark session with task hooks, and S3 helpers for
committed writes.

The session (tests/conftest.py): ``local[2,4]`` (2 cores; the second number is local mode's
task.maxFailures, so a failed task is retried up to 3 times - ``spark.task.maxFailures`` is
ignored in local mode but set too),
loopback only, no UI, small shuffles, UTC, Arrow batches of 50 rows so every task sees several
batches. ``spark.python.task.killTimeout`` is short so a killed attempt's Python worker goes
quickly.

Hadoop's S3A committers and spark-hadoop-cloud (``devtools.hadoop_jars``, fetched by the bootstrap)
are on the session's classpath, so Spark's own writers can commit through them beside ours; a
missing or altered jar fails the session, it never skips the tests that need it.

Speculation is NOT enabled: Spark never speculates in local mode (TaskSchedulerImpl.start only
starts the speculation thread ``if (!isLocal && SPECULATION_ENABLED)``), and it never places a
speculative copy on a host that already runs the task (``hasAttemptOnHost``), which rules out
local-cluster mode on one machine too. The speculation tests therefore drive what speculation does
to a write through Spark's own task-kill path plus duplicate attempts (see test_failures.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import spark_hooks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3


@pytest.fixture(scope="session")
def spark(spark: SparkSession) -> SparkSession:
    """The suite's session (tests/conftest.py), with this folder's task hooks shipped by value:
    executors import the installed package, not the test folders."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(spark_hooks)
    return spark


#: Set by PySpark when a Connect session is created; while set, ``pyspark.sql.functions`` and UDFs
#: build Spark Connect expressions, so it must be set only while a test uses the Connect session.
CONNECT_MODE_VARIABLE = "SPARK_CONNECT_MODE_ENABLED"


@pytest.fixture(scope="session")
def connect_server_session(spark: SparkSession) -> Iterator[SparkSession]:
    """A Spark Connect session on a server this test session starts (``support.connect``), always
    stopped at the end; its tasks run as the classic session's do (``local[2,4]``, UTC, 50-row
    batches). Created after the classic session, which then stays the process's classic one."""
    from pyspark.sql import SparkSession
    from support.connect import ConnectServer

    with ConnectServer() as server:
        session = SparkSession.builder.remote(server.url).create()
        os.environ.pop(CONNECT_MODE_VARIABLE, None)
        try:
            yield session
        finally:
            session.stop()


@pytest.fixture
def connect_spark(connect_server_session: SparkSession, monkeypatch: pytest.MonkeyPatch) -> SparkSession:
    """The Spark Connect session, in Connect mode for this test only (classic tests share the process)."""
    monkeypatch.setenv(CONNECT_MODE_VARIABLE, "1")
    return connect_server_session


@pytest.fixture(scope="module")
def spark_bucket(embedded_s3: EmbeddedS3) -> str:
    """One bucket per test module (a new SeaweedFS bucket costs ~0.6 s); tests use fresh prefixes."""
    return embedded_s3.create_bucket(f"spark-{uuid.uuid4().hex[:16]}")


@pytest.fixture
def s3_prefix(spark_bucket: str) -> str:
    """A fresh ``s3://bucket/prefix`` for one test."""
    return f"s3://{spark_bucket}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def s3_options(embedded_s3: EmbeddedS3) -> dict[str, Any]:
    """write_committed options pointing executors at the embedded S3."""
    return {
        "s3.endpoint_url": embedded_s3.endpoint_url,
        "s3.access_key_id": embedded_s3.access_key,
        "s3.secret_access_key": embedded_s3.secret_key,
        "s3.region": embedded_s3.region,
    }


@pytest.fixture(scope="session")
def spark_s3_store(embedded_s3: EmbeddedS3) -> Iterator[Any]:
    store = embedded_s3.store()
    yield store
    store.close()


@pytest.fixture(scope="session")
def arrow_s3(embedded_s3: EmbeddedS3) -> Any:
    """pyarrow's S3 filesystem on the embedded server, for reading results back."""
    from pyarrow import fs

    return fs.S3FileSystem(
        access_key=embedded_s3.access_key,
        secret_key=embedded_s3.secret_key,
        endpoint_override=embedded_s3.endpoint_url,
        region=embedded_s3.region,
        allow_bucket_creation=False,
    )


@pytest.fixture(scope="session")
def s3a_spark(spark: SparkSession, embedded_s3: EmbeddedS3) -> SparkSession:
    """The shared session, with Hadoop's S3A filesystem pointed at the embedded S3 (``s3a://``).

    Where the store is comes from ``s3a_store_conf`` (endpoint, region, path style, TLS, conditional
    create: SeaweedFS honours ``If-None-Match``); the credentials are set here apart, at runtime, so
    they stay inside this process (never on a command line, never in a conf we build). Set before
    the first ``s3a://`` access, because S3A caches one filesystem per bucket with the conf it saw.
    """
    from airflow_commit_provider.core.store.settings import S3Settings
    from airflow_commit_provider.spark.jvm_committers import s3a_store_conf
    from airflow_commit_provider.spark.session_conf import runtime_key

    where = s3a_store_conf(S3Settings(endpoint_url=embedded_s3.endpoint_url, region_name=embedded_s3.region))
    for key, value in where.items():
        spark.conf.set(runtime_key(key), value)
    spark.conf.set("fs.s3a.access.key", embedded_s3.access_key)
    spark.conf.set("fs.s3a.secret.key", embedded_s3.secret_key)
    return spark
