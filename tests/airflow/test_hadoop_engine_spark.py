"""engine="hadoop" with real Spark: Spark's own writer commits through Hadoop's classic committer,
submitted from a task process as a worker runs it.

This spark-submit runs PyPI's PySpark as a user gets it, without hadoop-aws or spark-hadoop-cloud
(``test_hadoop_engine_s3a.py`` runs those), so the JVM committer here is FileOutputCommitter v1 on
a local destination (``bind_commit_protocol=False``). Its `_SUCCESS` is the classic 0-byte marker:
the operator accepts it because it was written after this try started.

The same spark-submit shows what it needs and inherits on the worker, with Spark's real launcher.
A task process's stdin is the Airflow supervisor's socket: the try runs in a worker process whose
stdin is a socket, as the supervisor gives it, and the application (a wrapper that records, then
runs the example's job) reads which file its spark-submit (its parent, the launcher's JVM) has as
stdin, and what the driver's Spark conf holds of a private conf and of spark-defaults.conf.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).resolve().parents[2] / "dags_examples" / "jobs" / "daily_ingest_job.py"

#: An API key OpenLineage's transport may carry: private, never on a command line.
API_KEY = "ol-api-key-9f3c=x y"
PRIVATE = "spark.openlineage.transport.auth.apiKey"
DEFAULT = "spark.airflow_commit.test.from_defaults"

#: The application spark-submit runs: it records its parent (spark-submit's JVM), that one's stdin,
#: the mode of the properties file on its command line, and what the driver's Spark conf holds of a
#: private conf and of spark-defaults.conf; then it runs the example's job with the remaining args.
APPLICATION = f"""\
import json, os, runpy, sys
from pyspark import SparkConf, SparkContext
SparkContext._ensure_initialized()
parent = os.getppid()
command = open(f"/proc/{{parent}}/cmdline", "rb").read().decode().split("\\0")
properties = command[command.index("--properties-file") + 1]
record = {{
    "parent": parent,
    "parent_command": command,
    "parent_stdin": os.readlink(f"/proc/{{parent}}/fd/0"),
    "properties_mode": os.stat(properties).st_mode & 0o777,
    "conf": {{key: SparkConf().get(key, None) for key in ({PRIVATE!r}, {DEFAULT!r})}},
}}
with open(sys.argv[1], "w") as out:
    json.dump(record, out)
sys.argv = [{str(JOB)!r}, *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

#: One try of the task, in a process of its own (the task process): its summary and spark-submit's PID.
WORKER = f"""\
import json, sys
from types import SimpleNamespace
from airflow_commit_provider.operators import CommittedSparkSubmitOperator
application, record, source, destination = sys.argv[1:]
op = CommittedSparkSubmitOperator(
    task_id="write",
    application=application,
    destination=destination,
    committer="file-v1",
    engine="hadoop",
    jvm_conf_options={{"bind_commit_protocol": False}},
    application_args=[record, "--source", source, "--ds", "2024-01-01"],
    conf={{
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        {PRIVATE!r}: {API_KEY!r},
    }},
)
hooks = []
get_hook = op._get_hook
def recording_get_hook(**arguments):
    hooks.append(get_hook(**arguments))
    return hooks[-1]
op._get_hook = recording_get_hook
ti = SimpleNamespace(
    dag_id="ingest", task_id="write", run_id="manual__1", map_index=-1, try_number=1,
    xcom_push=lambda *args, **kwargs: None,
)
summary = op.execute({{"ti": ti}})
[submitted] = [hook.process_group for hook in hooks if hook.process_group is not None]
print(json.dumps({{"summary": summary, "spark_submit_pid": submitted}}, default=str))
"""


def test_classic_committer_through_spark_submitted_from_a_task_process(
    tmp_path: Path, spark_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "events.csv"
    with source.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["event_id", "amount"])
        writer.writerows([f"e{i}", i * 1.5] for i in range(100))
    application, record = tmp_path / "record_then_ingest.py", tmp_path / "record.json"
    application.write_text(APPLICATION)
    spark_conf_dir = tmp_path / "spark-conf"
    spark_conf_dir.mkdir()
    (spark_conf_dir / "spark-defaults.conf").write_text(f"{DEFAULT} yes\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(spark_conf_dir))
    destination = f"file://{tmp_path / 'table'}"
    supervisor, task_end = socket.socketpair()
    with supervisor, task_end:
        worker = subprocess.run(
            [sys.executable, "-c", WORKER, str(application), str(record), str(source), destination],
            stdin=task_end,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    assert worker.returncode == 0, worker.stdout[-3000:] + worker.stderr[-3000:]
    result = json.loads(worker.stdout.strip().splitlines()[-1])
    summary = result["summary"]

    # The classic committer's commit, accepted by the operator.
    assert (tmp_path / "table" / "_SUCCESS").read_bytes() == b""
    assert summary["engine"] == "hadoop" and summary["job_id"] == summary["try_job_id"]
    files = sorted(p.name for p in (tmp_path / "table" / "dt=2024-01-01").glob("part-*.parquet"))
    assert len(files) == 2
    visible = sorted(p.name for p in (tmp_path / "table").iterdir() if not p.name.startswith("."))
    assert visible == ["_SUCCESS", "dt=2024-01-01"], "no _temporary left"  # (.crc files are Hadoop's)

    # What spark-submit inherited: not the task's stdin; the private conf by file, on no command line.
    seen = json.loads(record.read_text())
    assert seen["parent"] == result["spark_submit_pid"], "the application's parent is spark-submit"
    assert "org.apache.spark.deploy.SparkSubmit" in seen["parent_command"]
    assert seen["parent_stdin"] == os.devnull, f"spark-submit's stdin is {seen['parent_stdin']}"
    assert seen["conf"] == {PRIVATE: API_KEY, DEFAULT: "yes"}, seen["conf"]
    assert API_KEY not in " ".join(seen["parent_command"])
    assert "ol-api-key" not in worker.stdout + worker.stderr
    assert seen["properties_mode"] == 0o600, oct(seen["properties_mode"])
