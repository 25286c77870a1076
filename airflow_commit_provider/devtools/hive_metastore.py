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

Production metastores are Thrift services instead (``hive.metastore.uris=thrift://...``: EMR,
Dataproc, HDP), which applications and other clients (``core.hive_metastore_catalog``) reach
without a database of their own. `HiveMetastoreService` runs one: Hive 2.3's own metastore handler
from PySpark's jars, kept in PostgreSQL as above, served on a loopback port
(``LoopbackMetastore.java`` says why not ``HiveMetaStore.main``); ``spark.config.thrift_metastore_conf``
points an application at it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from airflow_commit_provider.devtools.hadoop_jars import postgres_jdbc_jar, pyspark_jars_dir
from airflow_commit_provider.devtools.processes import read_first_line, signal_group
from airflow_commit_provider.spark.config import CATALOG_IMPLEMENTATION, WAREHOUSE_DIR, thrift_metastore_conf

POSTGRES_DRIVER_CLASS = "org.postgresql.Driver"
PASSWORD_KEY = "javax.jdo.option.ConnectionPassword"


def write_password_conf(directory: Path, password: str) -> Path:
    """``directory/hive-site.xml`` holding the metastore database's password, readable by its owner
    only; `directory` (created 0700 if missing) is what goes on the classpath."""
    return write_site_conf(directory, {PASSWORD_KEY: password})


def write_site_conf(directory: Path, properties: Mapping[str, str]) -> Path:
    """``directory/hive-site.xml`` with `properties`, readable by its owner only (it may hold the
    database's password); `directory` (created 0700 if missing) is what goes on the classpath."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    site = directory / "hive-site.xml"
    text = (
        '<?xml version="1.0"?>\n<configuration>\n'
        + "".join(
            f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>\n"
            for name, value in properties.items()
        )
        + "</configuration>\n"
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
        CATALOG_IMPLEMENTATION: "hive",
        WAREHOUSE_DIR: str(directory / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={directory / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={directory}",
    }


def shared_metastore_conf(jdbc_url: str, user: str, warehouse: str) -> dict[str, str]:
    """Spark conf of a Hive catalog in the PostgreSQL database at `jdbc_url`, tables without a
    location going under `warehouse`; the password and the classpath come apart (module docstring)."""
    return {
        CATALOG_IMPLEMENTATION: "hive",
        WAREHOUSE_DIR: warehouse,
        **{f"spark.hadoop.{key}": value for key, value in _database_conf(jdbc_url, user).items()},
    }


def _database_conf(jdbc_url: str, user: str) -> dict[str, str]:
    """The Hive keys of a metastore kept in PostgreSQL, but the password (module docstring)."""
    if not jdbc_url.startswith("jdbc:postgresql://"):
        raise ValueError(f"jdbc_url {jdbc_url!r} must be a jdbc:postgresql:// URL")
    return {
        "javax.jdo.option.ConnectionURL": jdbc_url,
        "javax.jdo.option.ConnectionDriverName": POSTGRES_DRIVER_CLASS,
        "javax.jdo.option.ConnectionUserName": user,
        "datanucleus.schema.autoCreateTables": "true",
        "datanucleus.schema.autoCreateColumns": "true",
        "datanucleus.schema.autoCreateConstraints": "false",
        "hive.metastore.schema.verification": "false",
    }


class HiveMetastoreError(RuntimeError):
    """The metastore service did not start (its log's tail is in the message)."""


#: Hive 2.3's handler served on a loopback address (the file says why it is not HiveMetaStore.main).
_LAUNCHER = Path(__file__).with_name("LoopbackMetastore.java")


class HiveMetastoreService:
    """Hive's Thrift metastore kept in the PostgreSQL database at `jdbc_url`, on a free port of
    `host` (loopback: nothing else on the network reaches it); always stopped by `stop`, the
    context manager or, failing both, at exit.

    The database's password goes only into an owner-only ``hive-site.xml`` on the server's
    classpath; the server's log (`log_path`) is in the service's own private directory.

    The metastore creates each partition's directory when it is added, through Hadoop's
    filesystems: for tables on S3, give S3A's jars (`extra_classpath`, e.g.
    ``hadoop_jars.peer_jars()``), its settings (`hadoop_conf`: ``fs.s3a.endpoint``...) and its
    credentials (`env`: ``AWS_ACCESS_KEY_ID``...; S3A reads them from its environment).
    """

    def __init__(
        self,
        jdbc_url: str,
        user: str,
        password: str,
        warehouse: str,
        *,
        host: str = "127.0.0.1",
        startup_timeout: float = 240.0,
        extra_classpath: Sequence[Path] = (),
        hadoop_conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._properties = {
            **(hadoop_conf or {}),
            **_database_conf(jdbc_url, user),
            PASSWORD_KEY: password,
            "hive.metastore.warehouse.dir": warehouse,
        }
        self.warehouse = warehouse
        self.host = host
        self.startup_timeout = startup_timeout
        self._extra_classpath = list(extra_classpath)
        self._env = dict(env or {})
        self.port: int | None = None
        self._directory: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never the password
        return f"HiveMetastoreService(uri={self.uri if self.port else None!r})"

    def __enter__(self) -> HiveMetastoreService:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def uri(self) -> str:
        if self.port is None:
            raise HiveMetastoreError("the metastore service is not started")
        return f"thrift://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return None if self._directory is None else self._directory / "metastore.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def spark_conf(self) -> dict[str, str]:
        """What an application needs to use it as its catalog."""
        return thrift_metastore_conf(self.uri, self.warehouse)

    def start(self) -> HiveMetastoreService:
        """Launch the server and return once it serves (it prints its port when it does)."""
        if self._process is not None:
            raise HiveMetastoreError("the metastore service is already started")
        java = shutil.which("java")
        if java is None:
            raise HiveMetastoreError(
                "java is not on PATH: the metastore service runs Hive's own (Java) server"
            )
        atexit.register(self.stop)
        try:
            self._directory = Path(tempfile.mkdtemp(prefix="hive-metastore-"))
            conf_dir = self._directory / "conf"
            write_site_conf(conf_dir, self._properties)
            jars = [postgres_jdbc_jar(), pyspark_jars_dir() / "*", *self._extra_classpath]
            classpath = os.pathsep.join(map(str, [conf_dir, *jars]))
            assert self.log_path is not None
            with self.log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    [java, "-Xmx512m", "-cp", classpath, str(_LAUNCHER), self.host],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    cwd=self._directory,  # Hive and DataNucleus write their scratch files here
                    env={**os.environ, **self._env},
                    start_new_session=True,
                )
            self.port = self._read_port(time.monotonic() + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _read_port(self, deadline: float) -> int:
        """The port from the server's ``listening <port>`` line: read as it comes, no polling."""
        assert self._process is not None
        received = read_first_line(
            self._process,
            deadline,
            what="the metastore",
            timeout=self.startup_timeout,
            log_tail=self._log_tail,
            error=HiveMetastoreError,
        )
        word, _, port = received.decode().partition("\n")[0].partition(" ")
        if word != "listening" or not port.isdigit():
            raise HiveMetastoreError(f"unexpected output from the metastore: {received[:200]!r}")
        return int(port)

    def _log_tail(self, lines: int = 30) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL it if it lingers, remove its files; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                signal_group(process.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(20)
            signal_group(process.pid, signal.SIGKILL)
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        self.port = None
        atexit.unregister(self.stop)
