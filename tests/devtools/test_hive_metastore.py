"""The shared metastore's settings: the password only in an owner-only ``hive-site.xml``, never in
the Spark conf that becomes a command line; a URL that is not PostgreSQL's is refused by name."""

from __future__ import annotations

import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from airflow_commit_provider.devtools.hadoop_jars import postgres_jdbc_jar
from airflow_commit_provider.devtools.hive_metastore import (
    PASSWORD_KEY,
    metastore_classpath,
    shared_metastore_conf,
    write_password_conf,
)


def test_password_conf_is_owner_only_and_escaped(tmp_path: Path) -> None:
    password = "p<&>'\"w"
    site = write_password_conf(tmp_path / "conf", password)
    assert site == tmp_path / "conf" / "hive-site.xml"
    assert stat.S_IMODE(site.stat().st_mode) == 0o600
    assert stat.S_IMODE(site.parent.stat().st_mode) == 0o700
    [prop] = ET.parse(site).getroot()
    assert (prop.findtext("name"), prop.findtext("value")) == (PASSWORD_KEY, password)


def test_conf_names_the_database_but_holds_no_password() -> None:
    conf = shared_metastore_conf("jdbc:postgresql://127.0.0.1:5432/metastore", "hive", "file:///w")
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == "jdbc:postgresql://127.0.0.1:5432/metastore"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"
    assert not [key for key in conf if "password" in key.lower()]


def test_classpath_has_the_password_folder_and_the_verified_driver(tmp_path: Path) -> None:
    assert metastore_classpath(tmp_path) == [tmp_path, postgres_jdbc_jar()]


def test_other_database_url_is_refused_by_name() -> None:
    with pytest.raises(
        ValueError, match=r"jdbc_url 'jdbc:derby:;databaseName=m' must be a jdbc:postgresql://"
    ):
        shared_metastore_conf("jdbc:derby:;databaseName=m", "hive", "file:///w")
