"""The suite's one Thrift Hive metastore service (``devtools.hive_metastore.HiveMetastoreService``),
kept in a database of a private PostgreSQL cluster, started by the first test that asks for it and
stopped at the end of the session. It reaches the embedded S3 through S3A (it creates the
directories of the partitions it adds), where Hadoop's jars match PySpark's Hadoop.

tests/conftest.py registers it as ``metastore_service`` for the whole suite, with the session's one
PostgreSQL cluster (``postgres``): a fixture function is cached where it is registered, so a test
module that imported a fixture of its own would start a service (a JVM and a schema) of its own. An
application reaches the service with its
``spark_conf()``, a Thrift client with its ``uri``. Tables are shared by every test of the session:
name them uniquely.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.devtools.hadoop_jars import HADOOP_VERSION, bundled_hadoop_version, peer_jars
from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
from airflow_commit_provider.devtools.postgres import Postgres
from airflow_commit_provider.spark.jvm_committers import s3a_store_conf


@contextlib.contextmanager
def running_metastore_service(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory, embedded_s3: Any
) -> Iterator[HiveMetastoreService]:
    """Hive's metastore on 127.0.0.1, kept in a new database of `postgres`, its warehouse in the
    session's temporary directory."""
    s3: dict[str, Any] = {}
    if bundled_hadoop_version() == HADOOP_VERSION:
        settings = S3Settings(endpoint_url=embedded_s3.endpoint_url, region_name=embedded_s3.region)
        hadoop_conf = {
            key.removeprefix("spark.hadoop."): value for key, value in s3a_store_conf(settings).items()
        }
        credentials = {key: value for key, value in embedded_s3.env().items() if key != "AWS_ENDPOINT_URL"}
        s3 = {"extra_classpath": peer_jars(), "hadoop_conf": hadoop_conf, "env": credentials}
    database = postgres.create_database(f"metastore_{secrets.token_hex(4)}")
    warehouse = tmp_path_factory.mktemp("metastore-warehouse")
    with HiveMetastoreService(
        database.jdbc_url, database.user, database.password, warehouse.as_uri(), **s3
    ) as service:
        yield service
