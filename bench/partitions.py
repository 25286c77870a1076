"""Scenario: one job that writes 10,000 partitions (issue 28, item 4), end to end on the embedded S3
with the partitioned committer: what each part of it costs, and that it did the right thing.

A first job writes one file into each of N partitions ``dt=2024-01-01/shard=.../`` (and another
into each of N partitions of the day before); then the job measured writes one new file into each
of the first day's partitions in ``replace`` mode, as a write of the table ``TABLE``, so its commit
finds and deletes the first job's N files. Measured, each step timed and its requests counted by
kind (the scenario's ``phases``, a table in REPORT.md):

- the tasks (writing and uploading the N files) and job commit, phase by phase (the job record's
  ``phases``), among them the per-partition `_SUCCESS` markers (one PUT each) and replace's
  conflict handling;
- replace's conflict listing on its own, the part of that phase which grows with partitions: one
  LIST per partition (what ``stages.conflicts.existing_output`` does below
  ``PARENT_LISTING_PARTITIONS``) against one listing of the partitions' common parent
  (``dt=2024-01-01/``, what it does from there on) and one of the whole destination, which holds
  the other day's N partitions too. From the cost of a LIST of one partition and of each key of a
  long listing (pages of 1,000 keys) comes the switch point: listing one scope of K keys once is
  cheaper than N LISTs of one partition each while K / N is below their ratio
  (``PARENT_LISTING_KEYS_PER_PARTITION``);
- registering the job's partitions on Hive's Thrift metastore kept in PostgreSQL, as a driver does
  after the commit (``catalog.register_table_partitions``: the partitions read from the job's
  partition list, in batches of ``REGISTRATION_BATCH``, then ``registeredPartitionCount`` in its
  record), the table on S3 through S3A (so the destination is an ``s3a://`` path); then again
  (nothing to change). Skipped with a note without PostgreSQL or Hadoop's S3A jars, and at ``tiny``
  size (the ``table_registration`` scenario runs the metastore there);
- the commit report of the job: ``load_commit`` and ``render_commit`` of the first and the last
  page of its partition table.

Checked, failing the scenario with a one-line error when wrong: the destination holds exactly the
replace job's files and the other day's (the first job's are gone, sizes as written); every
partition of both days has its `_SUCCESS` marker, and each of the replaced day's names the replace
job and its one partition; the table's `_SUCCESS` names the job with N files and N partitions;
the report's first and last partition pages hold the right partitions with one file of
``len(PAYLOAD)`` bytes each; the metastore lists exactly the N partitions at their locations, and
the record says N registered.

The asset events of such a job are measured by the ``asset_events`` scenario (``dag.test()``). The
store requests are counted by the store itself; the metastore's own S3A requests are not (another
process); the listing comparison counts its LIST calls by page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from airflow_commit_provider.core.catalog import (
    REGISTRATION_BATCH,
    Partition,
    location_path,
    register_table_partitions,
)
from airflow_commit_provider.core.committers import CommitOptions, TaskCommitResult, create_committer
from airflow_commit_provider.core.formats.phases import request_counts
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.layout import SUCCESS_FILENAME
from airflow_commit_provider.core.options import ConflictMode
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.conflicts import (
    PARENT_LISTING_KEYS_PER_PARTITION,
    PARENT_LISTING_PARTITIONS,
)
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.report.commit_report import load_commit
from airflow_commit_provider.report.html import render_commit
from bench.common import BenchEnv, ScenarioResult, log, new_id, timer

DAY = "dt=2024-01-01"
#: The day the destination holds besides the one the job writes (the whole-destination listing's extra).
OTHER_DAY = "dt=2023-12-31"
TASKS = 10
PAYLOAD = b"x" * 1024
#: The table the replace job writes (its partitions are registered in the metastore).
TABLE = "bench_partitions.events"
#: Partitions of the report's partition table per page (`load_commit`'s default page size).
REPORT_PAGE = 100


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
            "parent listing from": f"{PARENT_LISTING_PARTITIONS} partitions",
        },
    )
    if env.size == "tiny":
        result.notes.append(
            "registration is not measured at tiny size (table_registration runs the metastore)"
        )
    for turn in range(env.repeat):
        # Every phase of the first repetition goes in the phase table.
        phases = Phases(result if turn == 0 else None)
        with env.bucket("partitions") as bucket:
            store = env.s3.store()
            try:
                # s3a://: where the metastore finds the table's partitions (through S3A).
                destination = StorePath("s3a", bucket, "table")
                other = _write(store, destination, OTHER_DAY, partitions, env, "append")
                first = _write(store, destination, DAY, partitions, env, "append")
                record = _write(store, destination, DAY, partitions, env, "replace", phases)
                _check_store(store, destination, partitions, kept=other, replaced=first, job=record)
                _record_phases(result, record, partitions)
                _measure_listings(result, store, destination, partitions)
                _measure_report(result, phases, store, destination, record.job_id, partitions)
                if turn == 0 and env.size != "tiny":
                    _measure_registration(env, result, phases, store, destination, record, partitions)
            finally:
                store.close()
    result.notes.append(
        "checked: the destination holds exactly the replace job's files and the other day's (the "
        "first job's gone); every partition's _SUCCESS marker is there, the replaced day's naming the "
        "replace job; the table's _SUCCESS counts every file and partition; the report's first and last "
        "partition pages hold the right partitions"
        + ("; the metastore lists every partition at its location" if env.size != "tiny" else "")
    )
    return result


class Phases:
    """Times the scenario's steps and counts their requests by kind into `result.phases` (None:
    a repetition whose steps are not tabled)."""

    def __init__(self, result: ScenarioResult | None) -> None:
        self.result = result

    @contextlib.contextmanager
    def step(self, name: str, store: S3Store) -> Iterator[dict[str, int]]:
        """Time the block and count the store's requests in it; the block adds counts of its own
        (Thrift calls) to the dict it is given."""
        mark = store.statistics.snapshot()
        extra: dict[str, int] = {}
        with timer() as elapsed:
            yield extra
        requests = request_counts(store.statistics.counters_since(mark).counters)
        self.add(name, elapsed(), {**requests, **extra})

    def add(self, name: str, seconds: float, requests: dict[str, int]) -> None:
        if self.result is not None:
            self.result.phases.append({"name": name, "seconds": seconds, "requests": requests})


def _fail(message: str) -> RuntimeError:
    log(f"check failed: {message}")
    return RuntimeError(f"partitions scenario: {message}")


def _write(
    store: S3Store,
    destination: StorePath,
    day: str,
    partitions: int,
    env: BenchEnv,
    conflict_mode: ConflictMode,
    phases: Phases | None = None,
) -> SuccessData:
    """A job of `TASKS` tasks writing one file (`_file_name`) into each of `partitions` partitions
    of `day`; the measured one (`phases` given) writes `TABLE`."""
    job_id = new_id("job")
    options = CommitOptions(
        threads=env.threads,
        conflict_mode=conflict_mode,
        local_staging_dir=str(env.work_dir / "staging"),
        table=TABLE if phases is not None else None,
    )
    committer = create_committer("partitioned", store, destination, job_id, options)
    committer.setup_job()

    def task(number: int) -> TaskCommitResult:
        attempt = committer.task_attempt(number, 0)
        attempt.setup_task()
        for shard in range(number, partitions, TASKS):
            with attempt.create_file(_file_name(day, shard, job_id)) as stream:
                stream.write(PAYLOAD)
        return attempt.commit_task()

    phases = phases or Phases(None)
    with (
        phases.step(f"tasks: write and upload {partitions:,} files ({TASKS} tasks)", store),
        timer() as elapsed,
        ThreadPoolExecutor(TASKS, thread_name_prefix="task") as pool,
    ):
        results = list(pool.map(task, range(TASKS)))
    log(f"{partitions} partitions of {day}: tasks of {conflict_mode} job {job_id} in {elapsed():.1f} s")
    with phases.step("job commit, in all (its phases below)", store), timer() as elapsed:
        record = committer.commit_job(results)
    log(f"job commit ({conflict_mode}) in {elapsed():.1f} s")
    for phase in record.phases or ():
        phases.add(f"job commit: {phase.name}", (phase.end - phase.start) / 1000, phase.requests)
    return record


def _file_name(day: str, shard: int, job_id: str) -> str:
    """The file a job writes into partition `shard` of `day` (task ``shard % TASKS`` writes it)."""
    return f"{day}/shard={shard:05d}/part-{shard % TASKS:05d}-{job_id}.bin"


def _partition(day: str, shard: int) -> str:
    return f"{day}/shard={shard:05d}"


def _check_store(
    store: S3Store,
    destination: StorePath,
    partitions: int,
    *,
    kept: SuccessData,
    replaced: SuccessData,
    job: SuccessData,
) -> None:
    """After the replace: exactly the job's files and the other day's, every partition's marker,
    the replaced day's naming the job, and the table's `_SUCCESS` counting every file and partition.
    Raises naming the first things wrong."""
    shards = range(partitions)
    expected = {_file_name(DAY, shard, job.job_id) for shard in shards}
    expected |= {_file_name(OTHER_DAY, shard, kept.job_id) for shard in shards}
    visible: dict[str, int] = {}
    markers: set[str] = set()
    for status in store.list_files(destination):
        relative = status.path.relative_to(destination)
        if status.path.name == SUCCESS_FILENAME:
            markers.add(relative)
        elif not any(part.startswith(("_", ".")) for part in relative.split("/")):
            visible[relative] = status.size
    gone = sorted(expected - set(visible))
    extra = sorted(set(visible) - expected)
    if gone or extra:
        stale = sum(name.endswith(f"-{replaced.job_id}.bin") for name in extra)
        raise _fail(
            f"{destination}: {len(gone):,} files missing (first {gone[:3]}), {len(extra):,} not expected "
            f"({stale:,} of them the replaced job {replaced.job_id}'s; first {extra[:3]})"
        )
    wrong_size = sorted(name for name, size in visible.items() if size != len(PAYLOAD))
    if wrong_size:
        raise _fail(f"{destination}: {len(wrong_size):,} files not of {len(PAYLOAD)} bytes: {wrong_size[:3]}")
    wanted = {f"{_partition(day, shard)}/{SUCCESS_FILENAME}" for day in (DAY, OTHER_DAY) for shard in shards}
    if SUCCESS_FILENAME not in markers or wanted - markers:
        missing = sorted(wanted - markers | ({SUCCESS_FILENAME} - markers))
        raise _fail(f"{destination}: {len(missing):,} _SUCCESS markers missing: {missing[:3]}")

    def marker_of(shard: int) -> str | None:
        """What is wrong with the replaced day's marker of `shard`, if anything."""
        partition = _partition(DAY, shard)
        marker = SuccessData.read_head(store, destination.join(partition, SUCCESS_FILENAME))
        if marker.job_id != job.job_id or list(marker.partitions or ()) != [partition]:
            return f"{partition}/_SUCCESS names job {marker.job_id} and partitions {marker.partitions}"
        return None

    with ThreadPoolExecutor(16, thread_name_prefix="marker") as pool:
        wrong = [problem for problem in pool.map(marker_of, shards) if problem]
    if wrong:
        raise _fail(f"{len(wrong):,} markers of {DAY} do not name the replace job {job.job_id}: {wrong[:2]}")
    table = SuccessData.read_head(store, destination.join(SUCCESS_FILENAME))
    if (table.job_id, table.file_count, table.partition_count) != (job.job_id, partitions, partitions):
        raise _fail(
            f"{destination}/_SUCCESS names job {table.job_id} with {table.file_count} files and "
            f"{table.partition_count} partitions; expected {job.job_id} with {partitions} of each"
        )
    log(
        f"checked {destination}: {len(visible):,} files as expected, {len(markers):,} _SUCCESS files, "
        f"the {partitions:,} markers of {DAY} name job {job.job_id}"
    )


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
        f"{keys_per_partition:.0f} keys per partition the job writes. Job commit lists the partitions' "
        f"common parent once from {PARENT_LISTING_PARTITIONS} partitions written on, and gives it up for "
        f"one LIST each once it holds more than the job's files and {PARENT_LISTING_KEYS_PER_PARTITION} "
        "keys per partition (stages.conflicts)."
    )
    log(
        f"conflict listing of {partitions} partitions: {leaf_calls} LISTs in {leaf_seconds:.1f} s; "
        f"the day {day_calls} pages in {day_seconds:.1f} s; the destination {all_calls} pages in "
        f"{all_seconds:.1f} s; one listing wins below {keys_per_partition:.0f} keys per partition written"
    )


def _measure_report(
    result: ScenarioResult,
    phases: Phases,
    store: S3Store,
    destination: StorePath,
    job_id: str,
    partitions: int,
) -> None:
    """The report of the job: its first and last partition page, loaded and rendered, and checked:
    the page's partitions in order, each with the one file the job wrote there."""
    pages = -(-partitions // REPORT_PAGE)
    for label, page in (("first", 0), ("last", pages - 1)):
        with phases.step(f"report: {label} partition page", store), timer() as elapsed:
            report = load_commit(store, destination, job_id, partition_page=page)
            html = render_commit(report, partition_page_link=lambda n: f"?partition_page={n + 1}")
        result.measure(f"report, {label} partition page: seconds, {partitions} partitions", elapsed())
        result.measure(
            f"report, {label} partition page: HTML bytes, {partitions} partitions", len(html), "bytes"
        )
        shards = range(page * REPORT_PAGE, min(partitions, (page + 1) * REPORT_PAGE))
        wanted = [(_partition(DAY, shard), 1, len(PAYLOAD)) for shard in shards]
        rows = [(row.partition, row.files, row.bytes) for row in report.partitions]
        if (report.partition_count, report.partition_pages, rows) != (partitions, pages, wanted):
            wrong = next((pair for pair in zip(rows, wanted, strict=False) if pair[0] != pair[1]), None)
            raise _fail(
                f"report of job {job_id}, {label} partition page: {report.partition_count} partitions "
                f"in {report.partition_pages} pages, {len(rows)} rows (first wrong: {wrong}); expected "
                f"{partitions} in {pages}, {len(wanted)} rows from {wanted[0][0]}"
            )
        if wanted[0][0] not in html or wanted[-1][0] not in html:
            raise _fail(f"report of job {job_id}: the {label} partition page's HTML lacks {wanted[0][0]}")


def _measure_registration(
    env: BenchEnv,
    result: ScenarioResult,
    phases: Phases,
    store: S3Store,
    destination: StorePath,
    record: SuccessData,
    partitions: int,
) -> None:
    """The job's partitions registered on Hive's Thrift metastore, the table's location on S3 (S3A)."""
    from airflow_commit_provider.devtools.hadoop_jars import HadoopJarsError
    from airflow_commit_provider.devtools.postgres import PostgresError

    try:
        with _metastore_on_s3(env) as service:
            _register(result, phases, service, store, destination, record, partitions)
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


def _register(
    result: ScenarioResult,
    phases: Phases,
    service: Any,
    store: S3Store,
    destination: StorePath,
    record: SuccessData,
    partitions: int,
) -> None:
    """Register the job's partitions as its driver does after the commit, then again (a resumed
    driver: nothing changes); check the metastore and the record after each."""
    from airflow_commit_provider.devtools.metastore_client import (
        database,
        external_parquet_table,
        metastore_client,
    )

    database_name, table_name = TABLE.split(".")
    with metastore_client(service.host, service.port) as client:
        client.create_database(
            database(database_name, Path(service.warehouse.removeprefix("file://")).as_uri())
        )
        client.create_table(
            external_parquet_table(
                database_name, table_name, destination.uri(), partition_columns=("dt", "shard")
            )
        )
    catalog = _counting_catalog(service.uri)
    wanted: dict[tuple[str, ...], StorePath] = {
        (DAY.partition("=")[2], f"{shard:05d}"): destination.join(_partition(DAY, shard))
        for shard in range(partitions)
    }
    for case in ("new", "again"):
        catalog.clear()
        pending = dataclasses.replace(record, registered_partitions=None, registered_partition_count=None)
        with phases.step(f"registration ({case}): Thrift calls and our store's requests", store) as calls:
            with timer() as elapsed:
                register_table_partitions(catalog, store, destination, pending)
            calls.update(catalog.calls)
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
        if case == "again" and (catalog.calls["add_partitions_req"] or catalog.calls["alter_partitions"]):
            raise _fail(
                f"registering {TABLE}'s partitions again changed the metastore: {dict(catalog.calls)}"
            )
        listed = {values: location_path(location) for values, location in catalog.partitions(TABLE).items()}
        wrong = sorted(
            values for values in wanted.keys() | listed.keys() if listed.get(values) != wanted.get(values)
        )
        if wrong:
            raise _fail(
                f"the metastore lists {len(listed):,} partitions of {TABLE}, {len(wrong):,} of them missing, "
                f"extra or elsewhere (first {wrong[0]}: {listed.get(wrong[0])}, expected {wanted.get(wrong[0])})"
            )
        registered = load_job_record(store, destination, record.job_id).registered_partition_count
        if registered != partitions:
            raise _fail(
                f"job {record.job_id}'s record says {registered} partitions registered, not {partitions}"
            )


def _counting_catalog(uris: str) -> Any:
    """The Thrift catalog counting its calls, logging as each batch of partitions is handed over
    (a long registration shows its pace)."""
    from airflow_commit_provider.devtools.metastore_client import CountingMetastoreCatalog

    class BatchLogging(CountingMetastoreCatalog):
        def register_partitions(self, name: str, partitions: Iterable[Partition]) -> None:
            def logged() -> Iterator[Partition]:
                with timer() as elapsed:
                    for number, partition in enumerate(partitions):
                        if number and number % REGISTRATION_BATCH == 0:
                            log(f"registration: {number:,} partitions handed over in {elapsed():.0f} s")
                        yield partition

            super().register_partitions(name, logged())

    return BatchLogging(uris, timeout_seconds=1800)
