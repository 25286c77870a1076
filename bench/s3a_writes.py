"""Scenario: ours against Hadoop's S3A committers and Spark's classic commit, end to end on S3.

One DataFrame (`spark_tasks.make_frame`, parquet, snappy), one embedded S3, one Spark session
(`local[2]`, Hadoop's peers on its classpath, S3A pointed at the same server, the same thread count
for every committer's job commit):

- ours: `write_committed(...)` and `df.write.format("committed")`, each with the `magic`,
  `directory` and `partitioned` committers (`s3://`, append);
- Hadoop's: `df.write.parquet("s3a://...")` committed by S3A's magic, directory and partitioned
  committers (`jvm_committer_conf`: PathOutputCommitProtocol and BindingParquetOutputCommitter),
  and by Spark's classic commit over S3A (FileOutputCommitter v1: each rename a copy, twice per file);
- what bounds ours, in the same run, each step adding one stage: Spark's `noop` sink (making the
  rows, nothing else), `mapInArrow` into a task that only counts the rows (plus moving them from the
  JVM to Python, which Spark's own writer never does), and into a raw pyarrow write of one file per
  task with no commit protocol (plus encoding and uploading); and, informative, the transfer and
  `df.write.format("committed")` with Spark's per-row Arrow batch-size check off in the session
  (`ARROW_BYTE_CHECK_OFF`, what `register_data_source(spark, unmeasured_arrow_batches=True)` sets),
  which `write_committed` skips for its own job when the schema bounds a batch (this frame's does:
  `spark.arrow_batches`) and a data source's writes cannot skip on their own.

Per write: wall time; client CPU (`BenchEnv.client_cpu`: the driver's Python, the Spark JVM, its
Python workers); the S3 server's CPU (`BenchEnv.server_cpu`); requests per file written (ours: the
request counters in our `_SUCCESS`, the driver's and every task's; S3A: its filesystem's
`store_io_request` across the write); bytes copied inside the store (ours: `bytes_copied` in
`_SUCCESS`; S3A: `files_copied_bytes`). Targets: each of ours at most 1.0x of S3A magic's wall time,
and 0 bytes copied. `tiny` (the smoke test) runs the magic committers only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.spark import register_data_source
from airflow_commit_provider.spark.arrow_batches import BATCH_BYTES
from airflow_commit_provider.spark.config import ARROW_MAX_BYTES_PER_BATCH, ARROW_MAX_RECORDS_PER_BATCH
from airflow_commit_provider.spark.jvm_committers import jvm_committer_conf
from airflow_commit_provider.spark.session_conf import applied_conf
from airflow_commit_provider.spark.writer import write_committed
from airflow_commit_provider.success.check import load_success
from bench import spark_tasks
from bench.common import (
    ARROW_BYTE_CHECK_OFF,
    BenchEnv,
    ScenarioResult,
    log,
    new_id,
    requests_in,
    rotated,
    timer,
)
from bench.jvm_peers import S3A_BYTES_COPIED, S3A_REQUEST_KINDS, S3A_REQUESTS, file_v1_conf, s3a_statistics

TARGET_RATIO = 1.0
CODEC = "snappy"
COMMITTERS = ("magic", "directory", "partitioned")
ROUTES = ("write_committed", "format committed")


@dataclass(frozen=True)
class Variant:
    """One way to write the DataFrame: `kind` is ours, s3a, file-v1, noop, transfer or raw."""

    kind: str
    committer: str = ""
    route: str = ""
    arrow_byte_check_off: bool = False
    """Informative: run with `common.ARROW_BYTE_CHECK_OFF` (what moving rows to Python costs without it)."""
    arrow_records_per_batch: int = 0
    """Informative, with `arrow_byte_check_off`: the session's row limit too (0: Spark's default)."""
    arrow_measured: bool = False
    """Informative: Spark's 64 MiB byte limit set in the session, so Spark measures every batch after
    each row even for the data source (`MEASURED`: what its route cost before ``source_batches``)."""

    @property
    def name(self) -> str:
        suffix = ", Arrow byte check off" if self.arrow_byte_check_off else ""
        if self.arrow_measured:
            suffix += ", Spark measuring every row"
        if self.arrow_records_per_batch:
            suffix += f", {self.arrow_records_per_batch} rows per batch"
        return {
            "ours": f"{self.route}, {self.committer}",
            "s3a": f"S3A {self.committer}",
            "file-v1": "FileOutputCommitter v1 over S3A",
            "noop": "rows made only (Spark's noop sink)",
            "transfer": "mapInArrow, rows to Python only",
            "raw": "mapInArrow + raw pyarrow write",
        }[self.kind] + suffix

    @property
    def on_jvm(self) -> bool:
        """Committed by Hadoop, so measured by S3A's own counters."""
        return self.kind in ("s3a", "file-v1")


REFERENCE = Variant("s3a", "magic")
#: Spark's own byte limit, set in the session: Spark then measures every batch (`Variant.arrow_measured`).
MEASURED = {ARROW_MAX_BYTES_PER_BATCH: str(BATCH_BYTES)}


@dataclass
class Written:
    """What one write measured."""

    seconds: float
    cpu: dict[str, float]
    files: int
    bytes: int
    requests: int | None = None
    copied: int | None = None
    job_commit_seconds: float | None = None
    s3a_requests: dict[str, int] = field(default_factory=dict)
    server_cpu: float = 0.0


def run(env: BenchEnv) -> ScenarioResult:
    target_bytes = env.pick(tiny=256 * 1024, small=256 * 1024**2, full=1024**3)
    partitions = env.pick(tiny=2, small=4, full=8)
    committers = env.pick(tiny=COMMITTERS[:1], small=COMMITTERS, full=COMMITTERS)
    ours = [Variant("ours", committer, route) for route in ROUTES for committer in committers]
    hadoop = [Variant("s3a", committer) for committer in committers] + [Variant("file-v1")]
    bounds = [
        Variant("noop"),
        Variant("transfer"),
        Variant("transfer", arrow_byte_check_off=True),
        Variant("raw", arrow_byte_check_off=True),
        Variant("ours", "magic", "format committed", arrow_byte_check_off=True),
    ]
    variants = [*ours, *hadoop, *bounds]
    result = ScenarioResult(
        "s3a_writes",
        "Ours against Hadoop's S3A committers, end to end (same DataFrame, store and session)",
        env.size,
        env.repeat,
        parameters={
            "target_bytes": target_bytes,
            "spark_partitions": partitions,
            "format": f"parquet ({CODEC})",
            "ours": [variant.name for variant in ours],
            "baselines": [variant.name for variant in hadoop],
            "reference": f"{REFERENCE.name} (df.write.parquet, PathOutputCommitProtocol)",
            "threads": env.threads,
            "client CPU": "driver Python + Spark JVM (driver and executors) + its Python workers",
        },
    )
    result.notes.append(
        "Client CPU is the user+system CPU (from /proc/<pid>/stat) of every client process: the driver's "
        "Python, the one Spark JVM of local mode (driver and executors) and the Python workers it starts "
        "(ours encode and upload there); the S3 server's CPU is not counted. Requests per file: ours from "
        "the request counters in our `_SUCCESS` (driver and every task), S3A from its filesystem's "
        "`store_io_request` (every HTTP request) across the whole write."
    )
    spark = env.s3a_spark
    register_data_source(spark)
    df = spark_tasks.make_frame(spark, target_bytes, partitions)

    if env.size != "tiny":  # the smoke test only checks that the scenario runs
        # Warm-up (not measured): Python workers, imports, JIT, each path's first connections.
        small = spark_tasks.make_frame(spark, 256 * 1024, partitions)
        with env.bucket("s3aw-warmup") as bucket:
            for variant in variants:
                write_variant(env, variant, small, bucket)

    for rep in range(env.repeat):
        with env.bucket("s3aw") as bucket:
            written = {variant: write_variant(env, variant, df, bucket) for variant in rotated(variants, rep)}
        for variant in variants:
            _record(result, variant, written[variant])
        _compare(result, ours, bounds, written)
    return result


def write_variant(env: BenchEnv, variant: Variant, frame: Any, bucket: str) -> Written:
    """One write of `frame` by `variant` into a fresh prefix of `bucket`."""
    spark = env.s3a_spark
    prefix = new_id(variant.kind.replace("-", ""))
    url = f"s3://{bucket}/{prefix}"
    s3a_before = s3a_statistics(spark, bucket).counters
    cpu_before = env.client_cpu.parts()
    summary = None
    arrow = dict(ARROW_BYTE_CHECK_OFF) if variant.arrow_byte_check_off else {}
    if variant.arrow_measured:
        arrow.update(MEASURED)
    if variant.arrow_records_per_batch:
        arrow[ARROW_MAX_RECORDS_PER_BATCH] = str(variant.arrow_records_per_batch)
    with applied_conf(spark, arrow), timer() as elapsed, timer(env.server_cpu) as server_cpu:
        if variant.kind == "ours":
            summary = _write_ours(env, variant, frame, url)
        elif variant.on_jvm:
            s3a_url = f"s3a://{bucket}/{prefix}"
            conf = (
                jvm_committer_conf(s3a_url, variant.committer)
                if variant.kind == "s3a"
                else file_v1_conf("s3a")
            )
            with applied_conf(spark, conf):
                frame.write.option("compression", CODEC).parquet(s3a_url)
        elif variant.kind == "noop":
            frame.write.format("noop").mode("overwrite").save()
        elif variant.kind == "transfer":
            frame.mapInArrow(spark_tasks.transfer_only_task, spark_tasks.RAW_RESULT_SCHEMA).collect()
        else:
            frame.mapInArrow(_raw_task(env, bucket, prefix), spark_tasks.RAW_RESULT_SCHEMA).collect()
    seconds = elapsed()
    cpu_after = env.client_cpu.parts()
    cpu = {part: cpu_after[part] - cpu_before[part] for part in cpu_after}
    with env.s3.store().session() as store:
        written = _measured(store, variant, url, summary, seconds, cpu)
    written.server_cpu = server_cpu()
    if variant.on_jvm:
        gained = s3a_statistics(spark, bucket).counters_since(s3a_before).counters
        written.requests = gained.get(S3A_REQUESTS, 0)
        written.copied = gained.get(S3A_BYTES_COPIED, 0)
        written.s3a_requests = {op: gained[op] for op in S3A_REQUEST_KINDS if gained.get(op)}
    log(
        f"s3a_writes: {variant.name}: {written.bytes / 1e6:.0f} MB, {written.files} files in "
        f"{seconds:.2f} s, client CPU {sum(cpu.values()):.1f} s "
        f"({', '.join(f'{k} {v:.1f}' for k, v in cpu.items())}), server CPU {written.server_cpu:.1f} s, "
        f"requests {written.requests}, copied {written.copied}"
    )
    return written


def _write_ours(env: BenchEnv, variant: Variant, frame: Any, url: str) -> Any:
    """Our write through either route; `write_committed`'s summary (None for the data source)."""
    options: dict[str, Any] = {**env.s3_options(), "threads": env.threads, "compression": CODEC}
    if variant.route == "write_committed":
        return write_committed(frame, url, format="parquet", committer=variant.committer, options=options)
    (
        frame.write.format("committed")
        .mode("append")
        .option("format", "parquet")
        .option("committer", variant.committer)
        .options(**{key: str(value) for key, value in options.items()})
        .save(url)
    )
    return None


def _raw_task(env: BenchEnv, bucket: str, prefix: str) -> Any:
    arrow_s3 = {
        "endpoint": env.s3.endpoint_url,
        "access_key": env.s3.access_key,
        "secret_key": env.s3.secret_key,
        "region": env.s3.region,
    }
    return functools.partial(
        spark_tasks.raw_parquet_task, bucket, prefix, arrow_s3, CODEC, spark_tasks.ROW_GROUP_BYTES
    )


def _measured(
    store: Any, variant: Variant, url: str, summary: Any, seconds: float, cpu: dict[str, float]
) -> Written:
    """The write's data files and bytes, and what its `_SUCCESS` tells: our request counts, S3A's
    time to complete the uploads."""
    root = StorePath.parse(url)
    files = size = 0
    for status in store.list_files(root):
        # Names starting with `_` or `.` are not data, as for Spark.
        if not any(part.startswith(("_", ".")) for part in status.path.relative_to(root).split("/")):
            files += 1
            size += status.size
    written = Written(seconds, cpu, files, size)
    if variant.kind == "ours":
        counters = load_success(store, url).iostatistics.counters
        written.requests = requests_in(counters)
        written.copied = counters.get("bytes_copied", 0)
        written.job_commit_seconds = summary.job_commit_seconds if summary is not None else None
    elif variant.kind == "s3a":
        # S3A times its commitPendingUploads (load the pendingsets, complete) as committer_commit_job.
        commit = load_success(store, url).iostatistics.meanstatistics.get("committer_commit_job.mean")
        written.job_commit_seconds = commit["sum"] / 1000 if commit else None
    return written


def _record(result: ScenarioResult, variant: Variant, written: Written) -> None:
    name = variant.name
    result.measure(f"total seconds, {name}", written.seconds)
    result.measure(f"client CPU seconds, {name}", sum(written.cpu.values()))
    for part, seconds in written.cpu.items():
        result.measure(f"client CPU seconds ({part}), {name}", seconds)
    result.measure(f"S3 server CPU seconds, {name}", written.server_cpu)
    result.measure(f"files, {name}", written.files, "files")
    result.measure(f"bytes written, {name}", written.bytes, "bytes")
    if written.job_commit_seconds is not None:
        what = "job commit" if variant.kind == "ours" else "S3A committer_commit_job (completing the uploads)"
        result.measure(f"{what} seconds, {name}", written.job_commit_seconds)
    for op, count in written.s3a_requests.items():
        result.measure(f"S3A {op} per file, {name}", count / max(written.files, 1), "requests/file")
    if written.requests is not None:
        result.check(
            f"requests per file written, {name}",
            unit="requests/file",
            note="ours: request counters in our _SUCCESS; S3A: store_io_request across the write",
        ).values.append(written.requests / max(written.files, 1))
    if written.copied is not None:
        result.check(
            f"bytes copied, {name}", unit="bytes", target=0 if variant.kind == "ours" else None
        ).values.append(written.copied)


#: What a comparison measures, by the suffix of its name.
MEASURES: dict[str, tuple[str, Callable[[Written], float]]] = {
    "": ("s", lambda written: written.seconds),
    ", client CPU": ("s", lambda written: sum(written.cpu.values())),
    ", requests per file": ("requests/file", lambda written: (written.requests or 0) / max(written.files, 1)),
}


def _compare(
    result: ScenarioResult, ours: list[Variant], bounds: list[Variant], written: dict[Variant, Written]
) -> None:
    """Ours (and the bounds) against S3A magic; each of ours also against its S3A namesake and, for
    `write_committed`, against Spark's classic commit over S3A."""
    rows: list[tuple[Variant, Variant, str]] = []
    for variant in [*ours, *bounds]:
        rows += [(variant, REFERENCE, ""), (variant, REFERENCE, ", client CPU")]
    for variant in ours:
        rows.append((variant, REFERENCE, ", requests per file"))
        if Variant("s3a", variant.committer) != REFERENCE:
            rows.append((variant, Variant("s3a", variant.committer), ""))
        if variant.route == "write_committed":
            rows.append((variant, Variant("file-v1"), ""))
    for variant, baseline, what in rows:
        unit, measure = MEASURES[what]
        target = TARGET_RATIO if what == "" and variant in ours and baseline == REFERENCE else None
        result.comparison(
            f"{variant.name} vs {baseline.name}{what}",
            ours_label=variant.name,
            baseline_label=f"df.write.parquet ({baseline.name})",
            unit=unit,
            target=target,
            group="s3a_writes",
        ).add(measure(written[variant]), measure(written[baseline]))
