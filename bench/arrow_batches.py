"""Scenario: fast by default (issue 28, item 8). Our writes with the session as its user left it,
against S3A magic, end to end on the embedded S3.

One Spark session (`BenchEnv.s3a_spark`), the magic committer on both sides, parquet (snappy), and
the defaults of each route: ``df.write.format("committed")`` after ``register_data_source(spark)``,
and ``write_committed``. Two DataFrames of the same size on disk, each written by every variant in
every repetition (in a rotated order):

- numeric: `spark_tasks.make_frame` (an id, seven doubles, an int: every column of fixed width,
  the frame of `s3a_writes`);
- with strings: `spark_tasks.make_mixed_frame` (numbers, a timestamp and three strings, one of
  them a 64-character digest), as a typical table.

What differs between the routes is how the rows reach Python: Spark measures each Arrow batch
after every row unless told not to. ``write_committed`` skips the measurement where the schema
bounds a batch (the numeric frame; ``spark.arrow_batches``) and keeps it otherwise; the data
source's batches are cut by their rows' bytes in the JVM, unmeasured, whatever the schema
(``spark.source_batches``). Informative rows show the data source with Spark measuring every row
(its 64 MiB limit set in the session, which the rule keeps: what the route cost before it),
registered with ``unmeasured_arrow_batches=True`` (the session's measurement off, the Spark Connect
route: `common.ARROW_BYTE_CHECK_OFF`), on the numeric frame with the measurement off and 64 rows per
batch in the session (the row limit that would keep 1 MiB rows within 64 MiB unmeasured: what a
session setting safe for wide rows costs narrow ones) and, on the frame with strings,
``write_committed`` with the measurement off in the session (what it did for every frame before,
batches then bounded by rows only).

Target: each route with its defaults at most 1.0x of S3A magic's wall time (median of the
repetitions' ratios), on both frames.
"""

from __future__ import annotations

from airflow_commit_provider.spark import register_data_source
from bench import spark_tasks
from bench.common import BenchEnv, ScenarioResult, log, rotated
from bench.s3a_writes import REFERENCE, Variant, Written, write_variant

TARGET_RATIO = 1.0
#: Every DataFrame by name, and how it is made (`target_bytes`, `partitions`).
FRAMES = {"numeric": spark_tasks.make_frame, "with strings": spark_tasks.make_mixed_frame}
DEFAULTS = (Variant("ours", "magic", "write_committed"), Variant("ours", "magic", "format committed"))
DATA_SOURCE_UNMEASURED = Variant("ours", "magic", "format committed", arrow_byte_check_off=True)
DATA_SOURCE_MEASURED = Variant("ours", "magic", "format committed", arrow_measured=True)
#: Rows per batch that hold 1 MiB rows to Spark's 64 MiB without the measurement: what a session
#: setting safe for wide rows would cost narrow ones.
WIDE_SAFE_ROWS = 64
DATA_SOURCE_WIDE_SAFE_ROWS = Variant(
    "ours", "magic", "format committed", arrow_byte_check_off=True, arrow_records_per_batch=WIDE_SAFE_ROWS
)
WRITE_COMMITTED_UNMEASURED = Variant("ours", "magic", "write_committed", arrow_byte_check_off=True)
LABELS = {
    DEFAULTS[0]: "write_committed",
    DEFAULTS[1]: "df.write.format('committed')",
    DATA_SOURCE_UNMEASURED: "df.write.format('committed'), registered with unmeasured_arrow_batches=True",
    DATA_SOURCE_MEASURED: (
        "df.write.format('committed'), Spark measuring every row (its 64 MiB limit set in the session, as "
        "before the rule)"
    ),
    DATA_SOURCE_WIDE_SAFE_ROWS: (
        f"df.write.format('committed'), measurement off and {WIDE_SAFE_ROWS} rows per batch in the session"
    ),
    WRITE_COMMITTED_UNMEASURED: "write_committed, measurement off in the session (as before)",
}


def _variants(frame: str) -> list[Variant]:
    informative = [DATA_SOURCE_MEASURED, DATA_SOURCE_UNMEASURED]
    if frame == "numeric":
        informative.append(DATA_SOURCE_WIDE_SAFE_ROWS)
    else:  # on fixed-width rows write_committed skips the measurement anyway
        informative.append(WRITE_COMMITTED_UNMEASURED)
    return [REFERENCE, *DEFAULTS, *informative]


def run(env: BenchEnv) -> ScenarioResult:
    target_bytes = env.pick(tiny=256 * 1024, small=256 * 1024**2, full=1024**3)
    partitions = env.pick(tiny=2, small=4, full=8)
    result = ScenarioResult(
        "arrow_batches",
        "Fast by default: both routes with the session's defaults against S3A magic (embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "target_bytes": target_bytes,
            "spark_partitions": partitions,
            "format": "parquet (snappy)",
            "frames": {
                "numeric": "id, 7 random doubles, int (fixed width)",
                "with strings": "id, timestamp, 3 random doubles, int, 3 strings (user, method, 64-char digest)",
            },
            "ours": [LABELS[variant] for variant in DEFAULTS],
            "reference": f"{REFERENCE.name} (df.write.parquet, PathOutputCommitProtocol)",
            "threads": env.threads,
        },
    )
    result.notes.append(
        "Every route runs with the session as the user left it (no spark.sql.execution.arrow.* set), "
        "except the rows marked as informative. Ratios are per repetition (each variant wrote the same "
        "frame in the same repetition, in a rotated order), then the median."
    )
    spark = env.s3a_spark
    register_data_source(spark)
    frames = {name: make(spark, target_bytes, partitions) for name, make in FRAMES.items()}

    if env.size != "tiny":  # the smoke test only checks that the scenario runs
        with env.bucket("arrow-warmup") as bucket:
            for name, make in FRAMES.items():
                small = make(spark, 256 * 1024, partitions)
                for variant in _variants(name):
                    write_variant(env, variant, small, bucket)

    for rep in range(env.repeat):
        for frame_name in rotated(list(frames), rep):
            variants = _variants(frame_name)
            with env.bucket("arrow") as bucket:
                written = {
                    variant: write_variant(env, variant, frames[frame_name], bucket)
                    for variant in rotated(variants, rep)
                }
            _record(result, frame_name, variants, written)
    return result


def _record(
    result: ScenarioResult, frame: str, variants: list[Variant], written: dict[Variant, Written]
) -> None:
    reference = written[REFERENCE]
    for variant in variants:
        label = LABELS.get(variant, variant.name)
        result.measure(f"total seconds, {frame}, {label}", written[variant].seconds)
        result.measure(f"client CPU seconds, {frame}, {label}", sum(written[variant].cpu.values()))
        result.measure(f"bytes written, {frame}, {label}", written[variant].bytes, "bytes")
        if variant == REFERENCE:
            continue
        target = TARGET_RATIO if variant in DEFAULTS else None
        for what, measure in (("", _seconds), (", client CPU", _cpu)):
            result.comparison(
                f"{frame}: {label} vs S3A magic{what}",
                ours_label=label,
                baseline_label=f"df.write.parquet ({REFERENCE.name})",
                unit="s",
                target=target if not what else None,
                group="arrow_batches",
            ).add(measure(written[variant]), measure(reference))
    log(
        f"arrow_batches: {frame}: "
        + ", ".join(
            f"{LABELS.get(v, v.name)} {written[v].seconds / reference.seconds:.2f}x" for v in variants[1:]
        )
    )


def _seconds(written: Written) -> float:
    return written.seconds


def _cpu(written: Written) -> float:
    return sum(written.cpu.values())
