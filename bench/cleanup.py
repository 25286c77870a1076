"""Scenario 4: aborting orphaned multipart uploads on S3.

Ours: `core.cleanup.abort_pending_uploads` with its defaults (what the cleanup operator and
`airflow-commit uploads abort` run): list the uploads under the scope, abort each once, then list
the scope again and abort any upload still pending (S3 documents that an abort racing with part
uploads may need repeating): one request per upload plus the listings. The baseline:
ListMultipartUploads, then a raw parallel AbortMultipartUpload loop at the same thread count.
Target: ratio <= 0.7, and client CPU per aborted upload <= 0.25x the loop's CPU per request (ours
sends the aborts through AWS's CRT, `core/store/s3_crt.py`, several in flight from one thread).

An informative variant measures sizes first (`sizes=True`: one ListParts per upload for the parts
and bytes reclaimed, as dry runs and the hourly DAG do): 2 requests per upload.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_commit_provider.core.cleanup import abort_pending_uploads
from bench import s3_setup
from bench.common import BenchEnv, ScenarioResult, log, requests_in, timer

TARGET_RATIO = 0.7
#: Client CPU per aborted upload against the raw loop's client CPU per request.
TARGET_CPU_RATIO = 0.25
PAYLOAD = b"o" * 1024
PREFIX = "orphans"


def run(env: BenchEnv) -> ScenarioResult:
    sizes = env.pick(tiny=[20], small=[1000], full=[10000])
    result = ScenarioResult(
        "cleanup",
        "Aborting orphaned uploads (embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "uploads": sizes,
            "threads": env.threads,
            "part_bytes": len(PAYLOAD),
            "ours": "core.cleanup.abort_pending_uploads(store, scope, older_than=0, threads=N)",
            "baseline": "ListMultipartUploads pages, then raw parallel AbortMultipartUpload on N threads",
        },
    )
    for count in sizes:
        _run_size(env, result, count)
    return result


def _raw_abort(client: Any, bucket: str, threads: int) -> int:
    """List every pending upload under the prefix, then abort them all in parallel."""
    uploads: list[tuple[str, str]] = []
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": f"{PREFIX}/"}
    pages = 0
    while True:
        page = client.list_multipart_uploads(**kwargs)
        pages += 1
        uploads += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", ())]
        if not page.get("IsTruncated"):
            break
        kwargs["KeyMarker"] = page.get("NextKeyMarker") or kwargs.get("KeyMarker", "")
        kwargs["UploadIdMarker"] = page.get("NextUploadIdMarker")

    def abort(upload: tuple[str, str]) -> None:
        client.abort_multipart_upload(Bucket=bucket, Key=upload[0], UploadId=upload[1])

    with ThreadPoolExecutor(threads, thread_name_prefix="raw-abort") as pool:
        for _ in pool.map(abort, uploads):
            pass
    return pages + len(uploads)


VARIANTS = ("ours", "sizes", "raw")


def _ours(env: BenchEnv, bucket: str, count: int, variant: str) -> tuple[float, float, dict[str, int]]:
    """Our cleanup of the scope with a fresh store: seconds, client CPU seconds, request counters."""
    store = env.s3.store(max_pool_connections=env.threads + 4)
    store.hot  # noqa: B018 - the raw loop's client also exists before its timer starts
    scope = f"s3://{bucket}/{PREFIX}"
    sizes = True if variant == "sizes" else None  # None: the default, no sizes for a real abort
    try:
        with timer() as elapsed, timer(time.process_time) as cpu:
            report = abort_pending_uploads(store, scope, older_than=0, sizes=sizes, threads=env.threads)
        counters = store.statistics.snapshot()
    finally:
        store.close()
    if report.aborted != count or report.failed:
        raise RuntimeError(f"cleanup aborted {report.aborted}/{count}: {report.to_json()}")
    return elapsed(), cpu(), counters


def _raw(env: BenchEnv, bucket: str) -> tuple[float, float, int]:
    client = s3_setup.raw_client(env.s3, env.threads)
    try:
        with timer() as elapsed, timer(time.process_time) as cpu:
            requests = _raw_abort(client, bucket, env.threads)
    finally:
        client.close()
    return elapsed(), cpu(), requests


def _run_size(env: BenchEnv, result: ScenarioResult, count: int) -> None:
    label = f"{count:,} uploads"
    comparisons = {
        "ours": result.comparison(
            f"abort {label}",
            ours_label="abort_pending_uploads",
            baseline_label="raw list + parallel abort",
            unit="s",
            target=TARGET_RATIO,
            group="cleanup",
        ),
        "sizes": result.comparison(
            f"abort {label}, measuring sizes first",
            ours_label="abort_pending_uploads(sizes=True)",
            baseline_label="raw list + parallel abort",
            unit="s",
            group="cleanup",
        ),
        "cpu": result.comparison(
            f"client CPU per aborted upload, {label}",
            ours_label="abort_pending_uploads, CPU per upload",
            baseline_label="raw loop, CPU per request",
            unit="ms",
            target=TARGET_CPU_RATIO,
            group="cleanup_cpu",
        ),
    }
    for rep in range(env.repeat):
        log(f"cleanup: {label}, repetition {rep + 1}/{env.repeat}: creating {len(VARIANTS)} fresh sets")
        buckets = {name: env.new_bucket("cu-" + name.replace("-", "")[:12]) for name in VARIANTS}
        setup_client = s3_setup.raw_client(env.s3, s3_setup.SETUP_THREADS)
        try:
            with timer() as setup:
                for bucket in buckets.values():
                    s3_setup.create_raw_uploads(setup_client, bucket, PREFIX, count, PAYLOAD)
            log(f"cleanup: setup of {len(VARIANTS) * count} uploads took {setup():.1f} s")
            order = list(VARIANTS) if rep % 2 == 0 else list(reversed(VARIANTS))
            seconds: dict[str, float] = {}
            cpu: dict[str, float] = {}
            requests: dict[str, float] = {}
            counters: dict[str, dict[str, int]] = {}
            for name in order:
                if name == "raw":
                    seconds[name], cpu[name], raw_requests = _raw(env, buckets[name])
                    requests[name] = raw_requests
                else:
                    seconds[name], cpu[name], counters[name] = _ours(env, buckets[name], count, name)
                    requests[name] = requests_in(counters[name])
                result.measure(f"client CPU seconds ({name}), {label}", cpu[name])
                result.measure(
                    f"uploads aborted per second ({name}), {label}", count / seconds[name], "uploads/s"
                )
            for name in ("ours", "sizes"):
                comparisons[name].add(seconds[name], seconds["raw"])
            comparisons["cpu"].add(cpu["ours"] / count * 1000, cpu["raw"] / count * 1000)
            for name in VARIANTS:
                result.check(f"requests per upload, {label}, {name}", unit="requests/upload").values.append(
                    requests[name] / count
                )
            for op, value in counters["ours"].items():
                result.measure(f"{op} per upload, {label}, ours", value / count, "requests/upload")
            log(f"cleanup: {label}: seconds {seconds}, client CPU seconds {cpu}, requests {requests}")
        finally:
            setup_client.close()
            for bucket in buckets.values():
                env.drop_bucket(bucket)
