"""``df.write.format("committed")`` on the real standalone cluster, with a real speculative duplicate.

spark-submit runs ``datasource_app.py`` against the master; its executors sit on 127.0.0.1 and
127.0.0.2. The write goes through Spark's DataSource V2 path for Python data sources
(``PythonBatchWrite``, ``DataWritingSparkTask``) and the ``committed`` source's own ``write()`` in
the tasks, with the magic committer on the embedded S3. Attempt 0 of partition 0 is a straggler, so
Spark's speculation launches a copy of it on the other host; the app's hooks stage the rest of the
race with marker files (see ``datasource_app.py``): the copy commits its task first, the straggler
then commits too, and only after that does the copy hand its message to Spark.

**What happens to the losing attempt** (found by this test; Spark source read: ``PythonWrite.scala``
and ``WriteToDataSourceV2Exec.scala`` in ``sql/core/.../datasources/v2``). ``PythonBatchWrite`` does
not override ``BatchWrite.useCommitCoordinator()`` (default true), so ``WritingSparkTask.run`` asks
``OutputCommitCoordinator.canCommit(stage, stageAttempt, partition, attemptNumber)`` before
``DataWriter.commit()`` - but only after ``writeAll()`` has run the Python ``write()``, in which our
task commit already happened, and ``PythonBatchWriterFactory``'s ``DataWriter.commit()`` merely hands
back the pickled message. So the coordinator can choose which attempt's *message* reaches
``commit(messages)``, never which attempt's *files* are committed. In this race:

- both attempts run our task commit: the copy wins it, the straggler's exclusive task commit finds the
  task committed and adopts the copy's result (``adopted_from`` set), discarding its own upload;
- the copy is authorised by the coordinator and succeeds. Spark then kills the straggler twice over:
  ``TaskSetManager.handleSuccessfulTask`` kills the other attempts ("another attempt succeeded") and
  ``DAGScheduler.handleTaskCompletion``, as that success finishes the job, kills every attempt of the
  result stage still running ("Stage cancelled: Stage finished", the reason the executor usually
  reports, as it keeps the last). Its end reason is ``TaskKilled``, never ``TaskCommitDenied``: the
  loser is still inside Python ``write()`` when the winner's success arrives, and a denial could only
  happen if it reached ``canCommit`` in the instant between the winner's authorisation and its end;
- the straggler's Python process is destroyed (PySpark's ``MonitorThread`` kills the worker of an
  interrupted task after ``spark.python.task.killTimeout``, 2 s), so its ``write()`` never returns.
  That takes seconds, and Spark does not wait for it: the killed task ends after the job's end, and
  in some runs after ``save()`` returned, i.e. after job commit. A losing attempt can outlive the job
  commit (here it had nothing left to do);
- job commit uses the copy's message only; had the straggler's message been the one let through, it
  would name the same (the copy's) files.

The store must then hold exactly one copy of every row, ``_SUCCESS`` list exactly the visible files,
and no pending upload, magic directory or other temp object remain.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from cluster_support import (
    assert_speculated,
    cluster_conf,
    read_marker,
    run_submit,
    spark_submit_command,
)
from support.one_copy import assert_one_copy, relative_files
from support.spark_events import event_log
from support.standalone import StandaloneCluster

from airflow_commit_provider.core.layout import MAGIC_PREFIX
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

APP = Path(__file__).resolve().parent / "datasource_app.py"
ROWS = 2000
PARTITIONS = 4
SUBMIT_BOUND_SECONDS = 300.0
#: Why Spark kills the straggler: TaskSetManager.handleSuccessfulTask kills the other attempts of a
#: task that succeeded; DAGScheduler.handleTaskCompletion, when that success finishes the job, kills
#: every attempt of the result stage still running (TaskSchedulerImpl.killAllTaskAttempts adds the
#: prefix). The executor keeps the reason of the last kill it received.
KILL_REASONS = ("another attempt succeeded", "Stage cancelled: Stage finished")


def task_ends(events: list[dict[str, Any]], index: int) -> dict[int, dict[str, Any]]:
    """SparkListenerTaskEnd of every attempt of task ``index``, by attempt number."""
    return {
        e["Task Info"]["Attempt"]: e
        for e in events
        if e.get("Event") == "SparkListenerTaskEnd" and e["Task Info"]["Index"] == index
    }


def test_speculative_duplicate_of_a_data_source_task(
    spark_cluster: StandaloneCluster,
    embedded_s3: EmbeddedS3,
    cluster_bucket: str,
    markers: Path,
    event_log_dir: Path,
    tmp_path: Path,
) -> None:
    from airflow_commit_provider.operators.spark_submit import build_py_files_zip

    committer = "magic"
    destination = StorePath("s3", cluster_bucket, "tables/datasource")
    job_id = str(uuid.uuid4())
    app_args = [
        "--markers",
        str(markers),
        "--destination",
        str(destination),
        "--committer",
        committer,
        "--job-id",
        job_id,
        "--rows",
        str(ROWS),
        "--partitions",
        str(PARTITIONS),
    ]
    command = spark_submit_command(
        spark_cluster, cluster_conf(event_log_dir), build_py_files_zip(tmp_path), APP, app_args
    )
    run_submit(command, embedded_s3, SUBMIT_BOUND_SECONDS)
    result = read_marker(markers / "result.json")
    assert result["ok"], result
    assert result["stages"] and not any(stage["active"] for stage in result["stages"]), result

    # Spark really speculated: a second attempt of partition 0, marked speculative, on the other host.
    app_id = read_marker(markers / "started.json")["app_id"]
    copy = assert_speculated(event_log_dir, app_id)
    assert copy["Index"] == 0, copy
    straggler = read_marker(markers / "attempt-p0-0.json")
    speculative = read_marker(markers / f"attempt-p0-{copy['Attempt']}.json")
    assert speculative["attempt_id"] == copy["Task ID"] and speculative["executor_ip"] == copy["Host"]
    assert straggler["file"] and speculative["file"], "both attempts wrote a file before committing"

    # Both attempts ran our task commit: the copy won it, the straggler adopted the copy's result.
    won = read_marker(markers / "copy-committed.json")
    adopted = read_marker(markers / "straggler-adopted.json")
    assert won["attempt_id"] == copy["Task ID"] and won["result"]["adopted_from"] is None, won
    assert adopted["attempt_id"] == straggler["attempt_id"], adopted
    assert adopted["result"]["task_attempt_id"] == won["result"]["task_attempt_id"], (adopted, won)
    assert adopted["result"]["manifest"] == won["result"]["manifest"], (adopted, won)
    assert adopted["result"]["adopted_from"] not in (None, won["result"]["task_attempt_id"]), adopted

    # Then Spark: the copy's message was authorised and it succeeded; the straggler was killed by
    # the scheduler, not denied by the OutputCommitCoordinator (no TaskCommitDenied at all).
    events = event_log(event_log_dir, app_id)
    ends = task_ends(events, 0)
    assert set(ends) == {0, copy["Attempt"]}, ends
    assert ends[copy["Attempt"]]["Task End Reason"]["Reason"] == "Success", ends[copy["Attempt"]]
    killed = ends[0]["Task End Reason"]
    assert killed["Reason"] == "TaskKilled" and ends[0]["Task Info"]["Killed"], killed
    assert killed["Kill Reason"] in KILL_REASONS, killed
    # ... after the job's end (Spark does not wait for a killed attempt), its Python process gone.
    job_end = next(i for i, e in enumerate(events) if e.get("Event") == "SparkListenerJobEnd")
    assert events.index(ends[0]) > job_end
    assert result["straggler_python_alive"] is False, result
    assert not (markers / "straggler-not-killed.json").exists(), "the straggler's write() went on"
    reasons = [e["Task End Reason"]["Reason"] for e in events if e.get("Event") == "SparkListenerTaskEnd"]
    assert "TaskCommitDenied" not in reasons, reasons
    assert reasons.count("Success") == PARTITIONS, reasons

    # The store: one copy of every row, _SUCCESS lists exactly the visible files, nothing pending,
    # no magic directory or other temp object left.
    store = embedded_s3.store()
    try:
        success = assert_one_copy(store, destination, ROWS, job_id)
        assert success.committer == committer
        assert success.rows == ROWS
        assert len(success.filenames) == PARTITIONS
        assert not [name for name in relative_files(store, destination) if MAGIC_PREFIX in name]
        assert list(store.list_multipart_uploads(StorePath("s3", cluster_bucket, ""))) == []
    finally:
        store.close()
