"""The shared metastore's settings: the password only in an owner-only ``hive-site.xml``, never in
the Spark conf that becomes a command line; a URL that is not PostgreSQL's is refused by name. The
Thrift metastore service listens on loopback only and answers a Thrift call."""

from __future__ import annotations

import stat
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from airflow_commit_provider.devtools.hadoop_jars import postgres_jdbc_jar
from airflow_commit_provider.devtools.hive_metastore import (
    PASSWORD_KEY,
    HiveMetastoreService,
    metastore_classpath,
    shared_metastore_conf,
    write_password_conf,
)
from airflow_commit_provider.spark.config import thrift_metastore_conf


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


def test_service_conf_points_at_the_thrift_uri() -> None:
    conf = thrift_metastore_conf("thrift://127.0.0.1:9083", "file:///w")
    assert conf == {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": "file:///w",
        "spark.hadoop.hive.metastore.uris": "thrift://127.0.0.1:9083",
    }
    with pytest.raises(ValueError, match=r"metastore uri 'http://h:1' must be a thrift://host:port URI"):
        thrift_metastore_conf("http://h:1", "file:///w")


def test_service_listens_on_loopback_only_and_keeps_its_password_private(
    metastore_service: HiveMetastoreService,
) -> None:
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    port = metastore_service.port
    listening = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    )
    addresses = [line.split()[3] for line in listening.stdout.splitlines()]
    assert addresses and all(
        address.rsplit(":", 1)[0] in ("127.0.0.1", "[::ffff:127.0.0.1]") for address in addresses
    )
    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
    transport.open()
    try:
        assert "default" in ThriftHiveMetastore.Client(TBinaryProtocol(transport)).get_all_databases()
    finally:
        transport.close()
    assert metastore_service._process is not None
    pid = metastore_service._process.pid
    password = metastore_service._properties[PASSWORD_KEY]
    assert password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert metastore_service.log_path is not None and password not in metastore_service.log_path.read_text()
    assert password not in repr(metastore_service)
