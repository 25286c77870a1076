"""A driver killed in job commit, and a dead worker's orphaned try beside its retry: Hadoop's S3A
magic committer (Spark's own ``df.write``) and ours, in one Spark application of their own.

``side_by_side_app.py`` runs in its own process group, with S3 reached through ``support.s3_gate``,
which holds a job at a chosen request so that the fault lands at the same point of the protocol on
both sides, deterministically:

1. **Orphans** (Hadoop): two jobs of a try whose worker died, held at their first
   ``CompleteMultipartUpload`` (every task committed, nothing visible). Their retry runs in this
   process, on the same destination, appending; then the orphans are let go.
2. **Killed** (both): Hadoop's job and ours are held in job commit after their first completed
   upload (one file visible, the others pending); then the application is SIGKILLed and the held
   requests are dropped, as a dead process's would be. Each side is then aborted as its user would:
   Hadoop's with ``hadoop s3guard uploads -abort -force`` (Hadoop's own tool, run in this JVM) and
   then our ``abort_hadoop_job``; ours with ``abort_job``.

A retry after a try whose job committed needs no kill: its store is that of a committed write.

Ours beside an orphan is covered on the real cluster, where the orphan is a live spark-submit:
tests/cluster/test_cluster_operator_tries.py (a killed try's orphan is fenced and aborts itself;
a try that committed is adopted, no second copy).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from side_by_side_app import ROWS_PER_KILLED, ROWS_PER_ORPHAN
from side_by_side_support import ids, temp_objects, uploads_left
from support.invariants import read_success
from support.s3_gate import Hold, S3Gate
from support.standalone import group_alive
from support.waiting import wait_until

from airflow_commit_provider.core.job_control import JobState, abort_job, inspect_job
from airflow_commit_provider.core.layout import MAGIC_PREFIX, SUCCESS_FILENAME
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf
from airflow_commit_provider.tries.hadoop_jobs import abort_hadoop_job

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.hadoop_peers]

APP = Path(__file__).resolve().parent / "side_by_side_app.py"
#: Bound of every wait on the application (its start, with the JVM and Hadoop's jars, is the longest).
APP_BOUND_SECONDS = 240.0


@dataclass
class Destination:
    """One destination of the run: where the app writes, where Spark reads it here."""

    table: StorePath

    @property
    def s3a(self) -> str:
        return f"s3a://{self.table.bucket}/{self.table.key}"


@dataclass
class KilledRun:
    """What the application left, and what was seen at the moments that mattered."""

    orphans: dict[str, Destination]
    orphan_ends: dict[str, dict[str, Any]] = field(default_factory=dict)
    orphan_uploads_while_held: dict[str, int] = field(default_factory=dict)
    hadoop: Destination | None = None
    ours: Destination | None = None
    ours_job_id: str = ""
    visible_when_killed: dict[str, list[str]] = field(default_factory=dict)
    pending_when_killed: dict[str, int] = field(default_factory=dict)


def visible(store: Any, table: StorePath) -> list[str]:
    """Data objects a reader sees (no ``_``/``.``-prefixed path element)."""
    names = (status.path.relative_to(table) for status in store.list_files(table))
    return sorted(name for name in names if not any(part.startswith(("_", ".")) for part in name.split("/")))


def completes_under(table: StorePath) -> Any:
    return lambda request: request.completes_upload and request.key.startswith(f"{table.key}/")


def app_env(embedded_s3: Any) -> dict[str, str]:
    """Credentials and region from the environment; the endpoint is the gate's (in the spec)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update({k: v for k, v in embedded_s3.env().items() if k != "AWS_ENDPOINT_URL"})
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


@pytest.fixture(scope="module")
def killed_run(
    s3a_spark: Any, embedded_s3: Any, spark_bucket: str, spark_s3_store: Any, tmp_path_factory: Any
) -> Iterator[KilledRun]:
    spark, store = s3a_spark, spark_s3_store
    root = f"sbs-{uuid.uuid4().hex[:10]}"
    run = KilledRun(
        orphans={
            "retry-defaults": Destination(StorePath("s3", spark_bucket, f"{root}/orphan-retry-defaults")),
            "retry-keeps-uploads": Destination(StorePath("s3", spark_bucket, f"{root}/orphan-retry-keeps")),
        },
        hadoop=Destination(StorePath("s3", spark_bucket, f"{root}/killed-hadoop")),
        ours=Destination(StorePath("s3", spark_bucket, f"{root}/killed-ours")),
        ours_job_id=str(uuid.uuid4()),
    )
    assert run.hadoop and run.ours
    markers = tmp_path_factory.mktemp("side-by-side-killed")
    gate = S3Gate(embedded_s3.endpoint_url)
    spec = {
        "markers": str(markers),
        "endpoint": gate.endpoint_url,
        "region": embedded_s3.region,
        "orphans": {name: where.s3a for name, where in run.orphans.items()},
        "killed_hadoop": run.hadoop.s3a,
        "killed_ours": str(run.ours.table),
        "ours_job_id": run.ours_job_id,
    }
    (markers / "spec.json").write_text(json.dumps(spec))
    orphan_holds = {name: gate.hold(completes_under(where.table)) for name, where in run.orphans.items()}
    log = (markers / "app.log").open("w")
    app = subprocess.Popen(
        [sys.executable, str(APP), str(markers / "spec.json")],
        env=app_env(embedded_s3),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()

    def held(hold: Hold, what: str) -> None:
        wait_until(
            lambda: hold.held or app.poll() is not None,
            what,
            APP_BOUND_SECONDS,
        )
        assert hold.held, f"the application exited ({app.returncode}) before {what}:\n{app_log(markers)}"

    try:
        # 1. The orphans wait before their first upload completes; their retry runs here.
        for name, hold in orphan_holds.items():
            held(hold, f"orphan {name} reached job commit")
            run.orphan_uploads_while_held[name] = len(uploads_left(store, run.orphans[name].table))
        keep_uploads = {"spark.hadoop.fs.s3a.committer.abort.pending.uploads": "false"}
        for name, where in run.orphans.items():
            conf = jvm_committer_conf(where.s3a, "magic")
            with applied_conf(spark, conf | (keep_uploads if name == "retry-keeps-uploads" else {})):
                spark.range(ROWS_PER_ORPHAN, numPartitions=2).write.option("maxRecordsPerFile", 1).mode(
                    "append"
                ).parquet(where.s3a)
        for hold in orphan_holds.values():
            hold.release()
        for name in run.orphans:
            marker = markers / f"orphan-{name}.json"
            wait_until(
                lambda m=marker: m.exists() or app.poll() is not None,
                f"orphan {name} ended",
                APP_BOUND_SECONDS,
            )
            run.orphan_ends[name] = json.loads(marker.read_text())

        # 2. Both job commits held after their first completed upload, then the driver is killed.
        killed = {"hadoop": run.hadoop, "ours": run.ours}
        commit_holds = {
            side: gate.hold(completes_under(where.table), skip=1) for side, where in killed.items()
        }
        (markers / "go-kill").write_text("go")
        for side, hold in commit_holds.items():
            held(hold, f"{side}'s job commit completed an upload and waits on the next")
            wait_until(
                lambda w=killed[side]: visible(store, w.table),
                f"{side}'s first file visible",
                APP_BOUND_SECONDS,
            )
        os.killpg(app.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        app.wait(APP_BOUND_SECONDS)
        wait_until(lambda: not group_alive(app.pid), "the killed application's processes gone", 60)
        for hold in commit_holds.values():
            hold.drop()
        for side, where in killed.items():
            run.visible_when_killed[side] = visible(store, where.table)
            run.pending_when_killed[side] = len(uploads_left(store, where.table))
        yield run
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait(60)
        gate.close()


def app_log(markers: Path) -> str:
    path = markers / "app.log"
    return path.read_text(errors="replace")[-5000:] if path.exists() else "(no log)"


@pytest.mark.parametrize(("mode", "copies"), [("append", 2), ("overwrite", 1)])
def test_hadoop_retry_of_a_try_that_committed(
    s3a_spark: Any, spark_bucket: str, spark_s3_store: Any, mode: str, copies: int
) -> None:
    """Documents Hadoop's behaviour: a retry cannot tell that the try before it committed.

    The first try's job commits, then its worker dies before Airflow hears of it; that death changes
    nothing in the store, so the first try's write runs here to its end. The retry runs the same
    write: appending, every row is in the table twice; overwriting, once, by deleting and writing the
    whole table again. Ours adopts the committed job and runs no Spark job at all
    (tests/cluster/test_cluster_operator_tries.py::test_retry_adopts_a_try_that_committed,
    tests/tries/test_tries.py).
    """
    table = StorePath("s3", spark_bucket, f"committed-try-{uuid.uuid4().hex[:12]}")
    location = f"s3a://{table.bucket}/{table.key}"
    with applied_conf(s3a_spark, jvm_committer_conf(location, "magic")):
        for _try in (1, 2):
            s3a_spark.range(ROWS_PER_ORPHAN, numPartitions=2).write.mode(mode).parquet(location)
    assert ids(s3a_spark, location) == sorted(copies * list(range(ROWS_PER_ORPHAN)))
    assert uploads_left(spark_s3_store, table) == []
    assert temp_objects(spark_s3_store, table) == []


@pytest.mark.slow
def test_hadoop_orphan_beside_its_retry(killed_run: KilledRun, s3a_spark: Any, spark_s3_store: Any) -> None:
    """Documents Hadoop's behaviour: no adoption, no fencing; what happens to the orphan depends
    on the retry's ``fs.s3a.committer.abort.pending.uploads``.

    - Retry with the defaults: its job cleanup aborts every pending upload under the table, the
      orphan's included, so the orphan's job commit fails (``NoSuchUpload``) and the table holds one
      copy. Exactly once, by way of destroying another job's work.
    - Retry with ``abort.pending.uploads=false`` (Hadoop's advice when jobs may run concurrently):
      the orphan commits after the retry and every row is in the table twice.
    """
    run, store = killed_run, spark_s3_store
    assert run.orphan_uploads_while_held == {name: ROWS_PER_ORPHAN for name in run.orphans}, (
        "orphans not held"
    )

    defaults, keeps = run.orphans["retry-defaults"], run.orphans["retry-keeps-uploads"]
    assert not run.orphan_ends["retry-defaults"]["ok"]
    assert "NoSuchUpload" in run.orphan_ends["retry-defaults"]["error"]
    assert ids(s3a_spark, defaults.s3a) == list(range(ROWS_PER_ORPHAN)), "one copy"

    assert run.orphan_ends["retry-keeps-uploads"] == {"ok": True}
    assert ids(s3a_spark, keeps.s3a) == sorted(2 * list(range(ROWS_PER_ORPHAN))), "every row twice"

    for where in (defaults, keeps):
        assert uploads_left(store, where.table) == []
        assert temp_objects(store, where.table) == []


@pytest.mark.slow
def test_hadoop_job_commit_killed_then_aborted_keeps_partial_output(
    killed_run: KilledRun, s3a_spark: Any, spark_s3_store: Any
) -> None:
    """Documents Hadoop's behaviour: a killed S3A job commit is not all-or-nothing.

    Killed after its first completed upload: one of the 8 files is visible, no ``_SUCCESS``, the
    other 7 uploads pending. ``hadoop s3guard uploads -abort`` removes the pending uploads but leaves
    the ``__magic_job-*`` directory; our ``abort_hadoop_job`` removes that too. Neither can take
    back the file already completed: a reader sees 1 of 8 rows, and the Airflow retry (appending,
    as the killed try did) then reads that row twice.
    """
    run, store = killed_run, spark_s3_store
    assert run.hadoop is not None
    table, location = run.hadoop.table, run.hadoop.s3a
    assert (
        len(run.visible_when_killed["hadoop"]) == 1
        and run.pending_when_killed["hadoop"] == ROWS_PER_KILLED - 1
    )
    assert store.get_status(table.join(SUCCESS_FILENAME)) is None

    jvm = s3a_spark._jvm
    arguments = s3a_spark.sparkContext._gateway.new_array(jvm.java.lang.String, 4)
    for index, argument in enumerate(("uploads", "-abort", "-force", location)):
        arguments[index] = argument
    hadoop_conf = s3a_spark._jsparkSession.sessionState().newHadoopConf()
    assert jvm.org.apache.hadoop.fs.s3a.s3guard.S3GuardTool.run(hadoop_conf, arguments) == 0
    assert uploads_left(store, table) == []
    magic_dirs = {
        name.split("/", 1)[0] for name in temp_objects(store, table) if name.startswith(MAGIC_PREFIX)
    }
    assert len(magic_dirs) == 1, f"s3guard uploads -abort leaves the job's magic directory: {magic_dirs}"
    partial = ids(s3a_spark, location)
    assert len(partial) == 1, partial

    report = abort_hadoop_job(store, table, magic_dirs.pop().removeprefix(MAGIC_PREFIX))
    assert report.uploads_aborted == 0, "s3guard aborted them all; the store answers a repeat abort too"
    assert uploads_left(store, table) == []
    assert temp_objects(store, table) == []
    assert ids(s3a_spark, location) == partial, "an abort cannot take back a completed upload"

    with applied_conf(s3a_spark, jvm_committer_conf(location, "magic")):
        s3a_spark.range(ROWS_PER_KILLED, numPartitions=2).write.option("maxRecordsPerFile", 1).mode(
            "append"
        ).parquet(location)
    assert ids(s3a_spark, location) == sorted([*range(ROWS_PER_KILLED), *partial]), (
        "the retry duplicates the partial row"
    )


@pytest.mark.slow
def test_ours_job_commit_killed_then_aborted_is_all_or_nothing(
    killed_run: KilledRun, s3a_spark: Any, spark_s3_store: Any
) -> None:
    """Ours, killed at the same point: past its commit point (the outcome says commit), one file
    visible and 7 pending. ``abort_job`` from outside the dead driver rolls the commit forward:
    all 8 files, a ``_SUCCESS`` naming them, nothing pending or left behind. (Killed before the
    commit point, the abort removes everything instead: tests/core/test_commit_point.py kills a
    real process at every store call of job commit; a retry adopts a committed job:
    tests/tries/test_tries.py.)"""
    run, store = killed_run, spark_s3_store
    assert run.ours is not None
    table = run.ours.table
    assert (
        len(run.visible_when_killed["ours"]) == 1 and run.pending_when_killed["ours"] == ROWS_PER_KILLED - 1
    )
    assert store.get_status(table.join(SUCCESS_FILENAME)) is None
    assert inspect_job(store, table, run.ours_job_id).state is JobState.COMMITTING

    record = abort_job(store, table, run.ours_job_id, "magic", "the driver was killed in job commit")
    assert record is not None and record.job_id == run.ours_job_id
    assert ids(s3a_spark, run.ours.s3a) == list(range(ROWS_PER_KILLED))
    files = visible(store, table)
    assert len(files) == ROWS_PER_KILLED
    success = read_success(store, table)
    assert success.job_id == run.ours_job_id
    assert (
        sorted(
            StorePath.from_uri(entry.uri).relative_to(table) for entry in success.iter_all_files(store, table)
        )
        == files
    )
    assert uploads_left(store, table) == []
    assert temp_objects(store, table) == []
    assert inspect_job(store, table, run.ours_job_id).state is JobState.COMMITTED
