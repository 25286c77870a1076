"""Child process for the cleanup scenario: one cleanup in a fresh process, with its wall time,
client CPU, requests and peak RSS growth (sampled every 5 ms from just before the call).

    python -m bench.cleanup_memory {uploads,trees} --store s3 --bucket B --prefix P [--threads N] [--raw]
    python -m bench.cleanup_memory {uploads,trees} --store fake --count N [--threads N] [--raw]

`uploads` lists and aborts the pending uploads under the prefix; `trees` lists and deletes the
temporary tree there (`<prefix>/_temporary/<job>/...`). `--store s3` cleans what the parent made
on the embedded S3, whose endpoint and credentials come from the environment (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, ...), never the command line. `--store fake` first makes N uploads, or a tree
of N files, in the in-process stand-in for the boto3 client (`bench.fake_s3`), outside the
measurement: the real S3Store and every line of the cleanup run, only the server is replaced.
That is how a million items are measured: the embedded S3 would take hours to set them up. The
stand-in's objects are then frozen out of the garbage collector (`gc.freeze`): a server's million
objects are not in a client's heap, and each full collection would walk them all.

`--raw` measures the baseline instead: what a plain boto3 script does, with the client configured
as S3Store's. It lists every upload, then aborts each on N threads (so it holds the whole
listing), or deletes each listing page of keys with one DeleteObjects. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import boto3
from botocore.config import Config

from airflow_commit_provider.cleanup import abort_pending_uploads, clean_stale_temp_trees
from airflow_commit_provider.core.store.s3 import S3Store
from bench.common import RSSSampler, timer
from bench.fake_s3 import FakeS3Client

FAKE_BUCKET = "bench"
FAKE_PREFIX = "out/dataset1"
#: After the fake store's fixed `Initiated` and modification times: everything there is old.
FAKE_NOW = datetime(2026, 1, 3, tzinfo=timezone.utc)
#: Where a cleanup of `trees` finds its tree, under the prefix.
TREE = "_temporary/job-1/00/tasks/attempt_0"


def tree_key(prefix: str, index: int) -> str:
    """The key of file `index` of the temporary tree under `prefix` (a hundred partitions)."""
    return f"{prefix}/{TREE}/dt={index % 100:03d}/part-{index:07d}.bin"


def fake_client(kind: str, count: int) -> FakeS3Client:
    """`count` uploads, or a tree of `count` files, under the fake prefix, and one neighbour in
    `out/dataset10` that the cleanup must leave."""
    if kind == "uploads":
        uploads = {
            f"upload-{i:08d}": (FAKE_BUCKET, f"{FAKE_PREFIX}/dt={i % 100:03d}/part-{i:07d}.bin")
            for i in range(count)
        }
        uploads["upload-neighbour"] = (FAKE_BUCKET, "out/dataset10/part-0.bin")
        return FakeS3Client(uploads=uploads)
    objects: dict[tuple[str, str], bytes | int] = {
        (FAKE_BUCKET, tree_key(FAKE_PREFIX, i)): b"t" * 16 for i in range(count)
    }
    objects[(FAKE_BUCKET, f"out/dataset10/{TREE}/part-0.bin")] = b"neighbour"
    return FakeS3Client(objects, deletes=True)


def s3_client(threads: int) -> Any:
    """A boto3 client for the embedded S3 from the environment, configured like S3Store's."""
    return boto3.session.Session().client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        config=Config(
            s3={"addressing_style": "path"},
            max_pool_connections=threads + 4,
            retries={"mode": "standard", "max_attempts": 10},
        ),
    )


def raw_abort(client: Any, bucket: str, prefix: str, threads: int) -> dict[str, int]:
    """List every pending upload under the prefix, then abort them all on `threads` threads."""
    uploads: list[tuple[str, str]] = []
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": f"{prefix}/"}
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
    return {"requests": pages + len(uploads), "items": len(uploads)}


def raw_delete(client: Any, bucket: str, prefix: str) -> dict[str, int]:
    """Delete every key under the prefix: each ListObjectsV2 page with one DeleteObjects."""
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": f"{prefix}/"}
    requests = deleted = 0
    while True:
        page = client.list_objects_v2(**kwargs)
        requests += 1
        keys = [{"Key": entry["Key"]} for entry in page.get("Contents", ())]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            requests += 1
            deleted += len(keys)
        if not page.get("IsTruncated"):
            return {"requests": requests, "items": deleted}
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


def ours(kind: str, store: S3Store, scope: str, threads: int, now: datetime | None) -> dict[str, Any]:
    """Our cleanup of the scope with its defaults (what the operators and the CLI run), older_than=0."""
    if kind == "uploads":
        aborted = abort_pending_uploads(store, scope, older_than=0, now=now, threads=threads)
        counts = {
            "items": aborted.aborted,
            "listed": aborted.listing.count,
            "failed": aborted.count("failed"),
        }
        aborted.close()
    else:
        deleted = clean_stale_temp_trees(store, scope, older_than=0, now=now, threads=threads)
        counts = {
            "items": deleted.totals["files"],
            "listed": deleted.listing.stale_files,
            "failed": deleted.count("failed"),
        }
        deleted.close()
    return {**counts, "requests_by_op": store.statistics.snapshot()}


def measure(action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    gc.collect()
    with RSSSampler() as sampler, timer() as wall, timer(time.process_time) as cpu:
        result = action()
    return {
        **result,
        "seconds": round(wall(), 3),
        "cpu_seconds": round(cpu(), 3),
        "rss_baseline_bytes": sampler.baseline,
        "rss_growth_bytes": sampler.growth,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cleanup_memory")
    parser.add_argument("kind", choices=("uploads", "trees"))
    parser.add_argument("--store", choices=("s3", "fake"), required=True)
    parser.add_argument("--bucket", default=FAKE_BUCKET)
    parser.add_argument("--prefix", default=FAKE_PREFIX)
    parser.add_argument("--count", type=int, default=0, help="items to make first (--store fake)")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--raw", action="store_true", help="measure the raw boto3 loop instead")
    args = parser.parse_args()
    fake = fake_client(args.kind, args.count) if args.store == "fake" else None
    if fake is not None:  # the server's million objects are not the client's: out of the collector's sight
        gc.collect()
        gc.freeze()
    client = fake if fake is not None else s3_client(args.threads)
    if args.raw:
        if args.kind == "uploads":
            result = measure(lambda: raw_abort(client, args.bucket, args.prefix, args.threads))
        else:
            result = measure(lambda: raw_delete(client, args.bucket, args.prefix))
    else:
        if fake is not None:
            store = S3Store(client=fake)
        else:
            store = S3Store(
                endpoint_url=os.environ["AWS_ENDPOINT_URL"], max_pool_connections=args.threads + 4
            )
            store.hot  # noqa: B018 - the request path exists before the timer starts, as the raw client
        scope = f"s3://{args.bucket}/{args.prefix}"
        now = FAKE_NOW if fake is not None else None
        result = measure(lambda: ours(args.kind, store, scope, args.threads, now))
    if fake is not None:
        result["left"] = (
            sorted(f"{bucket}/{key}" for bucket, key in fake.objects) if args.kind == "trees" else []
        )
        result["left"] += sorted(f"{bucket}/{key}" for bucket, key in fake.uploads.values())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
