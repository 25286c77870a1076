"""Scenario: one job that writes 10,000 partitions (issue 28, item 4), end to end on the embedded S3
with the partitioned committer, and what each part of it costs.

A first job writes one file into each of N partitions ``dt=2024-01-01/shard=.../``; then the job
measured writes one new file into each of them in ``replace`` mode, so its commit finds and deletes
the first job's N files. Measured:

- job commit, phase by phase (the job record's ``phases``: time and store requests by kind),
  among them the per-partition `_SUCCESS` markers (one PUT each) and replace's conflict handling;
- replace's conflict listing on its own, the part of that phase which grows with partitions: one
  LIST per partition, as ``stages.conflicts.existing_output`` does today, against one listing of
  the partitions' common parent (``dt=2024-01-01/``) and one of the whole destination, which holds
  a second day of N partitions the job does not write. From the cost of a LIST of one partition and
  of each key of a long listing (pages of 1,000 keys) comes the switch point: listing one scope of
  K keys once is cheaper than N LISTs of one partition each while K / N is below their ratio;
- registering the N partitions on Hive's Thrift metastore kept in PostgreSQL
  (``HiveMetastoreCatalog``, batches of ``REGISTRATION_BATCH``), the partitions on S3 through S3A;
  skipped with a note without PostgreSQL or Hadoop's S3A jars, and at ``tiny`` size (the
  ``table_registration`` scenario runs the metastore there);
- the commit report of the job: ``load_commit`` and ``render_commit`` of the first and the last
  page of its partition table.

The asset events of such a job are measured by the ``asset_events`` scenario (``dag.test()``). The
store requests are counted by the store itself (the phases' ``requests``); the listing comparison
counts its LIST calls by page.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.catalog import REGISTRATION_BATCH, Partition
from airflow_commit_provider.core.commit_report import load_commit
from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.options import ConflictMode
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.report.html import render_commit
from bench.common import BenchEnv, ScenarioResult, log, new_id, timer

DAY = "dt=2024-01-01"
#: The day the destination holds besides the one the job writes (the whole-destination listing's extra).
OTHER_DAY = "dt=2023-12-31"
TASKS = 10
PAYLOAD = b"x" * 1024


def run(env: BenchEnv) -> ScenarioResult:
    partitions = env.pick(tiny=30, small=1000, full=10_000)
    result = ScenarioResult(
        "partitions",
        f"A job of {partitions:,} partitions, end to end (replace, partitioned committer, embedded S3)",
        env.size,
        env.repeat,
        parameters={
            "partitions": partitions,
            "files per partition": 1,
            "tasks": TASKS,
            "conflict mode": "replace (over a first job's file in each partition)",
            "store": "embedded S3 (SeaweedFS), S3Store",
        },
    )
    if env.size == "tiny":
        result.notes.append(
            "registration is not measured at tiny size (table_registration runs the metastore)"
        )
    for turn in range(env.repeat):
        with env.bucket("partitions") as bucket:
            store = env.s3.store()
            try:
                destination = StorePath("s3", bucket, "table")
                _write(store, destination, OTHER_DAY, partitions, env, "append")
                _write(store, destination, DAY, partitions, env, "append")
                record = _write(store, destination, DAY, partitions, env, "replace")
                _record_phases(result, record, partitions)
                _measure_listings(result, store, destination, partitions)
                _measure_report(result, store, destination, record.job_id, partitions)
                if turn == 0 and env.size != "tiny":
                    _measure_registration(env, result, destination, partitions)
            finally:
                store.close()
    return result


def _write(
    store: S3Store,
    destination: StorePath,
    day: str,
    partitions: int,
    env: BenchEnv,
    conflict_mode: ConflictMode,
) -> SuccessData:
    """A job of `TASKS` tasks writing one file into each of `partitions` partitions of `day`."""
    job_id = new_id("job")
    options = CommitOptions(
        threads=env.threads, conflict_mode=conflict_mode, local_staging_dir=str(env.work_dir / "staging")
    )
    committer = create_committer("partitioned", store, destination, job_id, options)
    committer.setup_job()

    def task(number: int) -> TaskCommitResult:
        attempt = committer.task_attempt(number, 0)
        attempt.setup_task()
        for shard in range(number, partitions, TASKS):
            with attempt.create_file(f"{day}/shard={shard:05d}/part-{number:05d}-{job_id}.bin") as stream:
                stream.write(PAYLOAD)
        return attempt.commit_task()

    with timer() as elapsed, ThreadPoolExecutor(TASKS, thread_name_prefix="task") as pool:
        results = list(pool.map(task, range(TASKS)))
    log(f"{partitions} partitions of {day}: tasks of {conflict_mode} job {job_id} in {elapsed():.1f} s")
    with timer() as elapsed:
        record = committer.commit_job(results)
    log(f"job commit ({conflict_mode}) in {elapsed():.1f} s")
    return record


def _record_phases(result: ScenarioResult, record: SuccessData, partitions: int) -> None:
    """Each phase of the replace job's commit: seconds, and its store requests by kind."""
    total = 0.0
    for phase in record.phases or ():
        seconds = (phase.end - phase.start) / 1000
        total += seconds
        result.measure(f"job commit phase {phase.name!r}: seconds, {partitions} partitions", seconds)
        for kind, count in phase.requests.items():
            result.measure(
                f"job commit phase {phase.name!r}: {kind}, {partitions} partitions", count, "requests"
            )
    result.measure(f"job commit, all phases: seconds, {partitions} partitions", total)
    result.measure(f"job commit: seconds per partition, {partitions} partitions", total / partitions)


def _measure_listings(
    result: ScenarioResult, store: S3Store, destination: StorePath, partitions: int
) -> None:
    """One LIST per partition (in turn, as the committer lists them) against one listing of the
    day and of the whole destination."""
    scopes = [destination.join(DAY, f"shard={shard:05d}") for shard in range(partitions)]
    client, bucket = store.client, destination.bucket

    def listed(prefix: str) -> tuple[int, int]:
        """(keys, LIST calls) of a paged listing of `prefix`."""
        keys = calls = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            calls += 1
            keys += page.get("KeyCount", 0)
        return keys, calls

    with timer() as elapsed:
        per_partition = [listed(scope.dir_prefix()) for scope in scopes]
    leaf_seconds = elapsed()
    leaf_calls = sum(calls for _, calls in per_partition)
    with timer() as elapsed:
        day_keys, day_calls = listed(destination.join(DAY).dir_prefix())
    day_seconds = elapsed()
    with timer() as elapsed:
        all_keys, all_calls = listed(destination.dir_prefix())
    all_seconds = elapsed()

    for scope, (seconds, calls, keys) in {
        "one LIST per partition": (leaf_seconds, leaf_calls, sum(keys for keys, _ in per_partition)),
        "one listing of the day": (day_seconds, day_calls, day_keys),
        "one listing of the destination": (all_seconds, all_calls, all_keys),
    }.items():
        result.measure(f"conflict listing, {scope}: seconds, {partitions} partitions", seconds)
        result.measure(f"conflict listing, {scope}: LIST calls, {partitions} partitions", calls, "calls")
        result.measure(f"conflict listing, {scope}: keys, {partitions} partitions", keys, "keys")
    result.comparison(
        f"conflict listing of {partitions} partitions: one listing of their day against one LIST each",
        ours_label="one listing of the day",
        baseline_label="one LIST per partition",
        unit="s",
        group="time",
    ).add(day_seconds, leaf_seconds)
    # The switch point: a LIST of one partition against a key of a long listing (pages of 1,000).
    per_leaf = leaf_seconds / leaf_calls
    per_key = all_seconds / all_keys
    keys_per_partition = per_leaf / per_key
    result.measure(f"conflict listing: seconds per LIST of one partition, {partitions} partitions", per_leaf)
    result.measure(
        f"conflict listing: seconds per key of the destination's listing, {partitions} partitions", per_key
    )
    result.measure(
        f"conflict listing: switch point, keys in scope per partition written, {partitions} partitions",
        keys_per_partition,
        "keys",
    )
    result.notes.append(
        f"replace's conflict listing at {partitions:,} partitions: {leaf_calls:,} LISTs (one per partition, "
        f"in turn) took {leaf_seconds:.1f} s; one listing of their day ({day_keys:,} keys, {day_calls} "
        f"pages) {day_seconds:.1f} s; of the whole destination ({all_keys:,} keys, {all_calls} pages) "
        f"{all_seconds:.1f} s. One listing of a scope is cheaper while it holds fewer than "
        f"{keys_per_partition:.0f} keys per partition the job writes: list the job's partitions' common "
        "parent once (merged with the sorted spool) past that many partitions, one LIST each below it."
    )
    log(
        f"conflict listing of {partitions} partitions: {leaf_calls} LISTs in {leaf_seconds:.1f} s; "
        f"the day {day_calls} pages in {day_seconds:.1f} s; the destination {all_calls} pages in "
        f"{all_seconds:.1f} s; one listing wins below {keys_per_partition:.0f} keys per partition written"
    )


def _measure_report(
    result: ScenarioResult, store: S3Store, destination: StorePath, job_id: str, partitions: int
) -> None:
    """The report of the job: its first and last partition page, loaded and rendered."""
    pages = -(-partitions // 100)
    for label, page in (("first", 0), ("last", pages - 1)):
        with timer() as elapsed:
            report = load_commit(store, destination, job_id, partition_page=page)
            html = render_commit(report, partition_page_link=lambda n: f"?partition_page={n + 1}")
        result.measure(f"report, {label} partition page: seconds, {partitions} partitions", elapsed())
        result.measure(
            f"report, {label} partition page: HTML bytes, {partitions} partitions", len(html), "bytes"
        )


def _measure_registration(
    env: BenchEnv, result: ScenarioResult, destination: StorePath, partitions: int
) -> None:
    """The job's partitions registered on Hive's Thrift metastore, the table's location on S3 (S3A)."""
    from airflow_commit_provider.devtools.hadoop_jars import HadoopJarsError
    from airflow_commit_provider.devtools.postgres import PostgresError

    try:
        with _metastore_on_s3(env) as service:
            _register(result, service, destination, partitions)
    except (PostgresError, HadoopJarsError) as error:
        result.notes.append(f"registration skipped: {error}")
        log(f"registration skipped: {error}")


@contextlib.contextmanager
def _metastore_on_s3(env: BenchEnv) -> Iterator[Any]:
    """Hive's Thrift metastore on PostgreSQL, reaching the embedded S3 through S3A (it checks each
    partition's directory when it is added)."""
    from airflow_commit_provider.core.store.settings import S3Settings
    from airflow_commit_provider.devtools.hadoop_jars import peer_jars
    from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
    from airflow_commit_provider.devtools.postgres import Postgres
    from airflow_commit_provider.spark.jvm_committers import s3a_store_conf

    settings = S3Settings(endpoint_url=env.s3.endpoint_url, region_name=env.s3.region)
    hadoop_conf = {
        key.removeprefix("spark.hadoop."): value for key, value in s3a_store_conf(settings).items()
    }
    credentials = {key: value for key, value in env.s3.env().items() if key != "AWS_ENDPOINT_URL"}
    warehouse = (env.work_dir / "partitions-warehouse").as_uri()
    with Postgres() as postgres:
        database = postgres.create_database(f"bench_partitions_{secrets.token_hex(4)}")
        with HiveMetastoreService(
            database.jdbc_url,
            database.user,
            database.password,
            warehouse,
            extra_classpath=peer_jars(),
            hadoop_conf=hadoop_conf,
            env=credentials,
        ) as service:
            yield service


def _register(result: ScenarioResult, service: Any, destination: StorePath, partitions: int) -> None:
    from airflow_commit_provider.devtools.metastore_client import (
        CountingMetastoreCatalog,
        database,
        external_parquet_table,
        metastore_client,
    )

    location = StorePath("s3a", destination.bucket, destination.key)
    wanted = [
        Partition(
            (("dt", DAY.partition("=")[2]), ("shard", f"{shard:05d}")),
            location.join(DAY, f"shard={shard:05d}"),
        )
        for shard in range(partitions)
    ]
    with metastore_client(service.host, service.port) as client:
        client.create_database(
            database("bench_partitions", Path(service.warehouse.removeprefix("file://")).as_uri())
        )
        client.create_table(
            external_parquet_table(
                "bench_partitions", "events", location.uri(), partition_columns=("dt", "shard")
            )
        )
    catalog = CountingMetastoreCatalog(service.uri, timeout_seconds=1800)
    for case in ("new", "again"):
        catalog.clear()
        with timer() as elapsed:
            catalog.register_partitions("bench_partitions.events", iter(wanted))
        seconds = elapsed()
        result.measure(f"registration ({case}): seconds, {partitions} partitions", seconds)
        result.measure(
            f"registration ({case}): seconds per partition, {partitions} partitions", seconds / partitions
        )
        result.measure(
            f"registration ({case}): Thrift calls, {partitions} partitions", catalog.calls.total(), "calls"
        )
        result.notes.append(
            f"registration ({case}) of {partitions} partitions in batches of {REGISTRATION_BATCH}: "
            + ", ".join(f"{name} {count}" for name, count in catalog.calls.items())
        )
        log(f"registration ({case}) of {partitions} partitions: {seconds:.1f} s, {dict(catalog.calls)}")
    listed = catalog.partitions("bench_partitions.events")
    if len(listed) != partitions:
        raise RuntimeError(f"the metastore lists {len(listed)} of the {partitions} partitions registered")
