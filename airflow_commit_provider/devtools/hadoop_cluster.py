"""A throwaway YARN + HDFS cluster on loopback, for tests and development: Hadoop's own
MiniDFSCluster (one DataNode) and MiniYARNCluster (one NodeManager), and a second NodeManager on
127.0.0.2 (a second host to Spark, which speculates a task only onto another host), in one JVM.

Platform teams run PySpark on YARN and keep tables on HDFS; this is the real thing at the Hadoop
that PySpark bundles, started from pinned Maven jars (``devtools.hadoop_jars``,
`MINICLUSTER_ARTIFACTS`) by ``MiniHadoopCluster.java``, a single-file Java program (no compile
step). Every server listens on 127.0.0.1 only. The cluster writes a client configuration
(``core-site.xml``, ``hdfs-site.xml``, ``yarn-site.xml``) into `HadoopCluster.conf_dir`: point
``HADOOP_CONF_DIR`` at it and ``spark-submit --master yarn`` submits there (`HadoopCluster.env`).

On its own, for development: ``airflow-commit-dev dev-hadoop`` (or ``python -m
airflow_commit_provider.devtools.hadoop_cluster``) runs one until Ctrl-C or SIGTERM and prints
its addresses and the ``HADOOP_CONF_DIR`` to export.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree

import requests

from airflow_commit_provider.devtools.hadoop_jars import minicluster_jars, pyspark_jars_dir
from airflow_commit_provider.devtools.processes import read_first_line, serve_until_signal, signal_group

#: Starts both clusters, writes the client configuration, prints "ready" (the file says when).
_LAUNCHER = Path(__file__).with_name("MiniHadoopCluster.java")
_READY = b"ready\n"

#: PySpark's own jars the minicluster runs on: Hadoop's shaded client (the minicluster jar's
#: declared dependencies) and a logging stack (SLF4J to Log4j 2, commons-logging over SLF4J).
_PYSPARK_JAR_PREFIXES = (
    "hadoop-client-api-",
    "hadoop-client-runtime-",
    "slf4j-api-",
    "log4j-slf4j2-impl-",
    "log4j-api-",
    "log4j-core-",
    "jcl-over-slf4j-",
)

#: What the cluster needs on this stack, each for a reason found starting it.
CLUSTER_SETTINGS: dict[str, str] = {
    # The shaded jar has no capacity-scheduler.xml, and without one the default CapacityScheduler
    # stops the ResourceManager ("Queue configuration missing child queue names for root").
    "yarn.resourcemanager.scheduler.class": (
        "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler"
    ),
    # A NodeManager whose disk is fuller than this (default 90 %) registers UNHEALTHY and gets no
    # containers; a shared development disk often is.
    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99",
    # Part of how long a stopping NodeManager waits for applications (with the SIGKILL delay and 1 s);
    # 5 s by default. At 0.5 s the session's teardown after one application went from 21 s to 16 s.
    "yarn.nodemanager.process-kill-wait.ms": "500",
}

#: How often Hadoop's metrics system samples (``*.periodMillis``, "for testing" in MetricsConfig):
#: the NameNode's JMX servlet answers from a cache refreshed at most once per period, 10 s by
#: default, so a read right after a write would not see it; at 10 ms, a read later than
#: `HadoopCluster.jmx_cache_seconds` after the previous one does (the benchmarks count NameNode calls).
METRICS_PERIOD_MS = 10
_METRICS_FILE = "hadoop-metrics2.properties"

#: Client configuration keys the properties read (written by the launcher).
_FS_DEFAULT_NAME = "fs.defaultFS"
_NAMENODE_HTTP = "dfs.namenode.http-address"
_RM_ADDRESS = "yarn.resourcemanager.address"
_RM_WEBAPP = "yarn.resourcemanager.webapp.address"


class HadoopClusterError(RuntimeError):
    """The cluster could not be started or is not running (its log's tail is in the message)."""


def classpath() -> list[Path]:
    """The minicluster's jars: the pinned ones (verified) and PySpark's that it runs on."""
    bundled = pyspark_jars_dir()
    found = []
    for prefix in _PYSPARK_JAR_PREFIXES:
        matches = sorted(bundled.glob(f"{prefix}[0-9]*.jar"))
        if not matches:
            raise HadoopClusterError(f"PySpark's jars in {bundled} have no {prefix}*.jar")
        found.append(matches[-1])
    return [*minicluster_jars(), *found]


class HadoopCluster:
    """MiniDFSCluster + MiniYARNCluster (and a second NodeManager) in one JVM, in a private
    temporary directory.

    Use as a context manager, or call `start()` and `stop()`; `stop()` also runs at exit, and the
    JVM stops by itself once the process that started it is gone (it watches its stdin). `start()`
    returns once Hadoop reports both clusters up: HDFS active with its DataNode, and the
    ResourceManager with both NodeManagers active.
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 600.0,
        stop_timeout: float = 60.0,
        java_heap: str = "768m",
    ) -> None:
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        """SIGTERM's grace: the NodeManager waits for running applications (about 25 s once some ran)."""
        self.java_heap = java_heap
        self.startup_seconds: float | None = None
        """Seconds the last `start()` took until the cluster was ready."""
        self._directory: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._conf: dict[str, str] = {}
        self._jmx_read_at: dict[str, float] = {}
        """When each metrics bean was last read (monotonic seconds), for `namenode_metrics`."""

    def __repr__(self) -> str:
        state = f"fs_default_name={self.fs_default_name!r}" if self._conf else "stopped"
        return f"HadoopCluster({state})"

    def __enter__(self) -> HadoopCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # What clients use --------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The JVM's process ID while it runs (it leads a process group of its own)."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def directory(self) -> Path | None:
        """The cluster's private temporary directory (its data, logs and configuration); gone after `stop()`."""
        return self._directory

    @property
    def conf_dir(self) -> Path:
        """The client configuration (core-site, hdfs-site, yarn-site): ``HADOOP_CONF_DIR``."""
        if self._directory is None or not self._conf:
            raise HadoopClusterError("the Hadoop cluster is not started")
        return self._directory / "conf"

    @property
    def fs_default_name(self) -> str:
        """HDFS's URI, ``hdfs://127.0.0.1:<NameNode RPC port>`` (the client configuration's ``fs.defaultFS``)."""
        return self._setting(_FS_DEFAULT_NAME)

    @property
    def webhdfs_url(self) -> str:
        """The NameNode's HTTP address, ``http://127.0.0.1:<port>`` (WebHDFS is under ``/webhdfs/v1``)."""
        return f"http://{self._setting(_NAMENODE_HTTP)}"

    @property
    def namenode_rpc_port(self) -> int:
        """The NameNode's client RPC port (its RPC metrics are ``RpcActivityForPort<port>``)."""
        return int(self.fs_default_name.rpartition(":")[2])

    #: How long the NameNode's JMX servlet answers a bean from its cache: one metrics period and 1 ms.
    jmx_cache_seconds = (METRICS_PERIOD_MS + 1) / 1000

    def namenode_metrics(self, bean: str) -> dict[str, int | float]:
        """The numbers of the NameNode's metrics bean `bean` (``NameNodeActivity``,
        ``RpcDetailedActivityForPort<port>``) as of this call, for counting what a stretch of work
        asked of the NameNode: a read sooner than `jmx_cache_seconds` after the previous read of
        `bean` first waits out the rest (at most 11 ms), or it would be answered from the cache the
        previous one filled, without the calls made in between."""
        wait = self._jmx_read_at.get(bean, 0.0) + self.jmx_cache_seconds - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        response = requests.get(
            f"{self.webhdfs_url}/jmx", params={"qry": f"Hadoop:service=NameNode,name={bean}"}, timeout=60
        )
        self._jmx_read_at[bean] = time.monotonic()
        response.raise_for_status()
        beans = response.json()["beans"]
        if len(beans) != 1:
            raise HadoopClusterError(f"the NameNode has {len(beans)} metrics beans named {bean!r}, not one")
        return {
            key: value
            for key, value in beans[0].items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }

    @property
    def rm_address(self) -> str:
        """The ResourceManager's client RPC address, ``127.0.0.1:<port>`` (where applications are submitted)."""
        return self._setting(_RM_ADDRESS)

    @property
    def rm_webapp_url(self) -> str:
        """The ResourceManager's web UI and REST API, ``http://127.0.0.1:<port>`` (``/ws/v1/cluster``)."""
        return f"http://{self._setting(_RM_WEBAPP)}"

    @property
    def log_path(self) -> Path | None:
        """The JVM's stderr (Hadoop logs warnings and errors there)."""
        return None if self._directory is None else self._directory / "cluster.log"

    @property
    def container_logs_dir(self) -> Path | None:
        """Where the first NodeManager (MiniYARNCluster's, ``localhost``) keeps containers' stdout
        and stderr (``<application>/<container>/``): a cluster-mode driver's error is only there (its
        application master, of 1 GB and Spark's overhead, never fits on the second NodeManager's
        1 GB; an executor or a client-mode AM may run there, logging under ``data/yarn-127.0.0.2``)."""
        if self._directory is None:
            return None
        return next(self._directory.glob("data/yarn/yarn-*/yarn-logDir-nm-0_0"), None)

    def env(self) -> dict[str, str]:
        """The environment a Hadoop or Spark client needs to use this cluster."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir)}

    def _setting(self, key: str) -> str:
        if not self._conf:
            raise HadoopClusterError("the Hadoop cluster is not started")
        return self._conf[key]

    # Lifecycle ---------------------------------------------------------------------------------
    def start(self) -> HadoopCluster:
        """Launch the JVM and return once Hadoop reports both clusters up."""
        if self._process is not None:
            raise HadoopClusterError("the Hadoop cluster is already started")
        java = shutil.which("java")
        if java is None:
            raise HadoopClusterError("java is not on PATH: the cluster is Hadoop's own (Java) servers")
        jars = os.pathsep.join(map(str, classpath()))
        began = time.monotonic()
        atexit.register(self.stop)
        try:
            self._directory = directory = Path(tempfile.mkdtemp(prefix="hadoop-cluster-"))
            for name in ("conf", "data", "tmp"):
                (directory / name).mkdir()
            # Hadoop's metrics system reads its file from the launcher's working directory.
            (directory / _METRICS_FILE).write_text(f"*.periodMillis={METRICS_PERIOD_MS}\n")
            settings = {**CLUSTER_SETTINGS, "hadoop.tmp.dir": str(directory / "tmp" / "hadoop")}
            command = [
                java,
                f"-Xmx{self.java_heap}",
                f"-Djava.io.tmpdir={directory / 'tmp'}",  # Jetty's and the compiler's scratch files
                f"-Dtest.build.data={directory / 'data'}",  # GenericTestUtils.getTestDir: YARN's dirs
                "-Dlog4j2.level=WARN",
                "-cp",
                jars,
                str(_LAUNCHER),
                str(directory / "conf"),
                *(f"{key}={value}" for key, value in settings.items()),
            ]
            assert self.log_path is not None
            with self.log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,  # its end tells the JVM that this process is gone
                    stdout=subprocess.PIPE,
                    stderr=log,
                    cwd=directory,
                    start_new_session=True,
                )
            self._wait_until_ready(began + self.startup_timeout)
            self._conf = _read_client_conf(directory / "conf")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        """Read the launcher's stdout as it comes until its "ready" line, or fail when it exits."""
        assert self._process is not None
        received = read_first_line(
            self._process,
            deadline,
            what="the Hadoop cluster",
            timeout=self.startup_timeout,
            log_tail=self._log_tail,
            error=HadoopClusterError,
        )
        if received != _READY:
            raise HadoopClusterError(f"unexpected output from the Hadoop cluster: {received[:200]!r}")

    def _log_tail(self, lines: int = 40) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM the JVM's process group (it stops YARN, then HDFS), SIGKILL it if it lingers,
        and remove the cluster's directory; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                signal_group(process.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(self.stop_timeout)
            signal_group(process.pid, signal.SIGKILL)  # also reaps any stray member of the group
            process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):  # a pipe the JVM has closed
                        stream.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        self._conf = {}
        atexit.unregister(self.stop)


def _read_client_conf(conf_dir: Path) -> dict[str, str]:
    """Every ``name``/``value`` of the ``*-site.xml`` files the launcher wrote."""
    conf = {}
    for site in sorted(conf_dir.glob("*-site.xml")):
        for prop in ElementTree.parse(site).getroot().iter("property"):
            conf[prop.findtext("name", "")] = prop.findtext("value", "")
    return conf


def serve() -> int:
    """Run a cluster until SIGINT or SIGTERM, printing its addresses; 0 once stopped, 1 if it died."""
    cluster = HadoopCluster()

    def announce() -> None:
        print(
            f"Hadoop cluster (HDFS + YARN) running on 127.0.0.1, ready in {cluster.startup_seconds:.0f} s",
            flush=True,
        )
        print(f"export HADOOP_CONF_DIR={cluster.conf_dir}", flush=True)
        print(f"HDFS: {cluster.fs_default_name} (WebHDFS {cluster.webhdfs_url}/webhdfs/v1)", flush=True)
        print(f"YARN: {cluster.rm_address} (web UI and REST {cluster.rm_webapp_url})", flush=True)
        print("Stop with Ctrl-C or SIGTERM (its data goes with it).", flush=True)

    return serve_until_signal(cluster, announce, "hadoop cluster: the JVM")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.parse_args(argv)
    return serve()


if __name__ == "__main__":
    sys.exit(main())
