"""A stand-in for `spark-submit`, run as a real process by SparkSubmitHook in the operator tests.

It parses the command line the hook built, records it (and the AWS/PySpark environment) as JSON,
imports this package *from the shipped --py-files zip*, and then behaves like a PySpark
application using the core committers, as FAKE_SPARK_MODE says:

- ``commit``: writes two task outputs and commits the job under the job ID it was given;
- ``stale``: writes nothing and exits 0 (whatever `_SUCCESS` was there stays);
- ``legacy``: writes a 0-byte `_SUCCESS`, as Hadoop's classic FileOutputCommitter does;
- ``foreign``: commits under another job ID;
- ``crash``: commits the tasks (pending uploads, manifests) and exits 3 before job commit,
  like a driver that dies without cleaning up;
- ``hang``: commits the tasks, says "ready" through the FIFO FAKE_SPARK_READY, then waits for
  a signal forever;
- ``commit-then-fail``: commits the job, then exits 4 (an application failing after its write);
- ``pause-before-commit``, ``pause-at-commit-point``, ``pause-after-commit``: commits the tasks
  and pauses before job commit, at the commit point (the outcome is written, nothing else of the
  commit yet) or after job commit: it writes the file FAKE_SPARK_PAUSED and blocks reading the
  FIFO FAKE_SPARK_GO until the test releases it (or kills it), then carries on.

FAKE_SPARK_PARTITION (``dt=2024-01-01``) puts the task outputs in that partition directory;
with FAKE_SPARK_PARTITION_COUNT (N) too, each task writes one file into each of N partitions
under it (``dt=2024-01-01/shard=00000`` ...).
With ``spark.airflow_commit.table`` set, the job records the table and, having no catalog, leaves
its registration pending. Given the operator's registration-only application
(``finish_registration.py``), the fake registers the job's partitions with the core's
``register_committed`` in a catalog that writes what it is asked to FAKE_SPARK_CATALOG (JSON), or,
with FAKE_SPARK_REGISTRATION=fail, exits 1 as if the metastore were down.

FAKE_SPARK_MODE_BY_TRY (``"1=commit-then-fail,2=commit"``) picks the mode by the try number the
operator passed, for DAG runs where every try shares one environment. When job commit is refused
because the job was fenced, the fake exits 5; it writes how it ended (``committed``, ``fenced:
<error>``) to FAKE_SPARK_RESULT when that is set.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def parse(argv: list[str]) -> tuple[dict[str, str], dict[str, str], str, list[str]]:
    options: dict[str, str] = {}
    confs: dict[str, str] = {}
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--conf":
            key, _, value = argv[index + 1].partition("=")
            confs[key] = value
            index += 2
        elif arg == "--verbose":
            index += 1
        elif arg.startswith("--"):
            options[arg[2:]] = argv[index + 1]
            index += 2
        else:
            return options, confs, arg, argv[index + 1 :]
    raise SystemExit("fake spark-submit: no application given")


def main(argv: list[str]) -> int:
    options, confs, application, args = parse(argv)
    record = {
        "argv": argv,
        "options": options,
        "confs": confs,
        "application": application,
        "args": args,
        "env": {
            name: os.environ.get(name)
            for name in (
                "AWS_ENDPOINT_URL",
                "AWS_DEFAULT_REGION",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "PYSPARK_PYTHON",
                "PYSPARK_DRIVER_PYTHON",
                "FAKE_SPARK_MODE",
            )
        },
        "pgid": os.getpgid(0),
        "pid": os.getpid(),
    }
    zips = [p for p in options.get("py-files", "").split(",") if p.endswith(".zip")]
    if zips:
        sys.path.insert(0, zips[-1])
    import airflow_commit_provider
    from airflow_commit_provider.spark import config as cfg

    record["package_file"] = airflow_commit_provider.__file__
    with open(os.environ["FAKE_SPARK_RECORD"], "w") as stream:
        json.dump(record, stream)

    if Path(application).name == "finish_registration.py":
        return register(args)
    mode = mode_for_try(confs.get(cfg.CONF_TRY_NUMBER))
    say(f"mode {mode}, job {confs.get(cfg.CONF_JOB_ID)}")
    if mode == "stale":
        return 0
    if mode == "legacy":  # what Hadoop's classic FileOutputCommitter leaves
        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.core.store import open_store

        destination = StorePath.parse(confs[cfg.CONF_DESTINATION])
        open_store(destination).write_bytes(destination.join("_SUCCESS"), b"")
        return 0
    from airflow_commit_provider.core.committers import CommitOptions, create_committer
    from airflow_commit_provider.core.stages.errors import JobFencedError
    from airflow_commit_provider.core.store import open_store

    destination = confs[cfg.CONF_DESTINATION]
    job_id = confs[cfg.CONF_JOB_ID]
    if mode == "foreign":
        job_id = f"foreign-{job_id}"
    options_ = CommitOptions(
        threads=2,
        conflict_mode=confs.get(cfg.CONF_CONFLICT_MODE, "append"),
        table=confs.get(cfg.CONF_TABLE),
    )
    store = open_store(destination)
    if mode == "pause-at-commit-point":
        store = pause_after_the_outcome(store)
    committer = create_committer(confs[cfg.CONF_COMMITTER], store, destination, job_id, options_)
    try:
        committer.setup_job()
    except JobFencedError as error:
        return refused(error)
    results = []
    partition = os.environ.get("FAKE_SPARK_PARTITION", "")
    count = os.environ.get("FAKE_SPARK_PARTITION_COUNT")
    partitions = [partition] if count is None else [f"{partition}/shard={n:05d}" for n in range(int(count))]
    for task in range(2):
        attempt = committer.task_attempt(task, 0)
        attempt.setup_task()
        for directory in partitions:
            with attempt.create_file(f"{directory}/part-{task:05d}-{job_id}.csv".lstrip("/")) as stream:
                stream.write(b"id\n" + f"{task}\n".encode() * 10)
        results.append(attempt.commit_task(rows=10 * len(partitions)))
    if mode == "crash":
        say("the driver dies before job commit")
        os._exit(3)
    if mode == "hang":
        with open(os.environ["FAKE_SPARK_READY"], "w") as fifo:
            fifo.write("ready\n")
        while True:
            signal.pause()
    if mode == "pause-before-commit":
        pause()
    try:
        committer.commit_job(results)
    except JobFencedError as error:
        return refused(error)
    say("job committed")
    report("committed")
    if mode == "pause-after-commit":
        pause()
    if mode == "commit-then-fail":
        say("the application fails after its write")
        return 4
    return 0


class RecordingCatalog:
    """A catalog that writes the partitions it is asked to register to FAKE_SPARK_CATALOG."""

    def register_partitions(self, name: str, partitions: Any) -> None:
        asked = {name: [[list(values) for values in p.values] + [str(p.location)] for p in partitions]}
        Path(os.environ["FAKE_SPARK_CATALOG"]).write_text(json.dumps(asked))


def register(args: list[str]) -> int:
    """The registration-only application: DESTINATION TABLE JOB_ID."""
    from airflow_commit_provider.core.catalog import register_committed
    from airflow_commit_provider.core.job_records import load_job_record
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store import open_store

    destination, table, job_id = args
    if os.environ.get("FAKE_SPARK_REGISTRATION") == "fail":
        say(f"registering job {job_id} in {table} failed: the metastore is down")
        return 1
    location = StorePath.parse(destination)
    store = open_store(location)
    try:
        record = load_job_record(store, location, job_id)

        def values(path: str) -> tuple[tuple[str, str | None], ...]:
            return tuple(
                (column, value) for column, _, value in (part.partition("=") for part in path.split("/"))
            )

        register_committed(RecordingCatalog(), store, location, record, values)
    finally:
        store.close()
    say(f"registered job {job_id} in {table}")
    return 0


def mode_for_try(try_number: str | None) -> str:
    by_try = dict(
        item.split("=", 1) for item in os.environ.get("FAKE_SPARK_MODE_BY_TRY", "").split(",") if item
    )
    return by_try.get(try_number or "", os.environ.get("FAKE_SPARK_MODE", "commit"))


def pause() -> None:
    """Say so through FAKE_SPARK_PAUSED, then block until the test writes to FAKE_SPARK_GO."""
    paused = os.environ["FAKE_SPARK_PAUSED"]
    with open(paused + ".tmp", "w") as stream:
        stream.write(str(os.getpid()))
    os.replace(paused + ".tmp", paused)
    with open(os.environ["FAKE_SPARK_GO"]) as fifo:
        fifo.read()


def pause_after_the_outcome(store: Any) -> Any:
    """The store, pausing at the first write after the job's outcome: the commit point is passed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support.faults import FaultInjectingStore, StoreCall

    faulty = FaultInjectingStore(store)
    lock = threading.Lock()
    seen = {"outcome": False, "paused": False}

    def on_call(call: StoreCall) -> None:  # runs before each call; job commit calls from threads
        with lock:
            if not seen["outcome"]:
                seen["outcome"] = call.mutating and call.path.endswith(".outcome.json")
                return
            if not call.mutating or seen["paused"]:
                return
            seen["paused"] = True
        pause()

    faulty.on_call = on_call
    return faulty


def refused(error: Exception) -> int:
    report(f"fenced: {error}")
    say(f"refused: {error}")
    return 5


def say(message: str) -> None:
    """Print to spark-submit's output; an orphan whose task process died has no reader left."""
    with contextlib.suppress(OSError):
        print(f"fake spark-submit: {message}", flush=True)


def report(result: str) -> None:
    path = os.environ.get("FAKE_SPARK_RESULT")
    if path:
        with open(path, "w") as stream:
            stream.write(result)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
