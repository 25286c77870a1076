"""Spark's Hive catalog on a metastore that several applications share, kept in PostgreSQL.

PySpark ships Hive 2.3's metastore client (DataNucleus over JDBC). Its default, an embedded Derby
database, admits one application at a time; production metastores keep their tables in a real
database that every application reaches. Each application then needs:

- ``spark.sql.catalogImplementation=hive`` and the ``javax.jdo.option.Connection*`` keys (as
  ``spark.hadoop.*``, which Spark hands to the Hive client);
- the metastore's schema, created by the first application that needs each table (Hive's schema
  tool and its SQL scripts are not in PySpark), and ``hive.metastore.schema.verification=false`` (no
  version row until the schema tool writes one). DataNucleus creates a table when a class is first
  used, on a connection of its own, inside the client's open transaction: with
  ``datanucleus.schema.autoCreateAll`` its foreign keys come too, and on PostgreSQL the ``ALTER
  TABLE .. ADD CONSTRAINT`` then waits for ever on the lock that the client's own transaction holds
  on the referenced table (seen: ``TBL_PRIVS_FK1`` on ``TBLS`` during the first ``CREATE TABLE``).
  So tables and columns are created, constraints are not;
- PostgreSQL's JDBC driver on the driver's classpath (``devtools.hadoop_jars.postgres_jdbc_jar``);
- the password, which must reach neither a command line (``spark.*`` settings given to PySpark's
  builder become ``spark-submit --conf`` arguments) nor a log: it goes in a ``hive-site.xml`` that
  only its owner can read, in a directory put on the driver's classpath, where Spark's
  ``SharedState`` and Hive's ``HiveConf`` both look for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from xml.sax.saxutils import escape

from airflow_commit_provider.devtools.hadoop_jars import postgres_jdbc_jar

POSTGRES_DRIVER_CLASS = "org.postgresql.Driver"
PASSWORD_KEY = "javax.jdo.option.ConnectionPassword"


def write_password_conf(directory: Path, password: str) -> Path:
    """``directory/hive-site.xml`` holding the metastore database's password, readable by its owner
    only; `directory` (created 0700 if missing) is what goes on the classpath."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    site = directory / "hive-site.xml"
    text = (
        '<?xml version="1.0"?>\n<configuration>\n'
        f"  <property><name>{PASSWORD_KEY}</name><value>{escape(password)}</value></property>\n"
        "</configuration>\n"
    )
    descriptor = os.open(site, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(text)
    return site


def metastore_classpath(password_conf_dir: Path) -> list[Path]:
    """What the driver's classpath needs: the password's ``hive-site.xml`` folder and the verified
    JDBC driver (HadoopJarsError names what is missing)."""
    return [password_conf_dir, postgres_jdbc_jar()]


def embedded_metastore_conf(directory: Path) -> dict[str, str]:
    """Spark conf of a Hive catalog on an embedded Derby metastore kept in `directory` (its
    database, Derby's log and the warehouse): one application's own, as the suite's session and
    the benchmarks' have it."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(directory / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={directory / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={directory}",
    }


def shared_metastore_conf(jdbc_url: str, user: str, warehouse: str) -> dict[str, str]:
    """Spark conf of a Hive catalog in the PostgreSQL database at `jdbc_url`, tables without a
    location going under `warehouse`; the password and the classpath come apart (module docstring)."""
    if not jdbc_url.startswith("jdbc:postgresql://"):
        raise ValueError(f"jdbc_url {jdbc_url!r} must be a jdbc:postgresql:// URL")
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": warehouse,
        "spark.hadoop.javax.jdo.option.ConnectionURL": jdbc_url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": POSTGRES_DRIVER_CLASS,
        "spark.hadoop.javax.jdo.option.ConnectionUserName": user,
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }
