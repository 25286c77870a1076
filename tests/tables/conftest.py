"""Fixtures of the catalog-table tests: Debian's PostgreSQL, and a Hive metastore kept in it that
several Spark applications share (``devtools.hive_metastore``)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from tables_support import SharedMetastore

from airflow_commit_provider.devtools.hive_metastore import write_password_conf
from airflow_commit_provider.devtools.postgres import Postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One private PostgreSQL cluster for the session; each metastore gets a database of its own."""
    with Postgres() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def shared_metastore(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> SharedMetastore:
    """A fresh, empty metastore database (the first application creates its schema)."""
    database = postgres.create_database(f"metastore_{secrets.token_hex(4)}")
    root = tmp_path_factory.mktemp("metastore")
    password_conf = root / "password-conf"
    write_password_conf(password_conf, database.password)
    return SharedMetastore(database, password_conf, root / "warehouse")
