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
  a signal forever.
"""

from __future__ import annotations

import json
import os
import signal
import sys

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

    record["package_file"] = airflow_commit_provider.__file__
    with open(os.environ["FAKE_SPARK_RECORD"], "w") as stream:
        json.dump(record, stream)

    mode = os.environ.get("FAKE_SPARK_MODE", "commit")
    print(f"fake spark-submit: mode {mode}, job {confs.get('spark.airflow_commit.job_id')}", flush=True)
    if mode == "stale":
        return 0
    if mode == "legacy":  # what Hadoop's classic FileOutputCommitter leaves
        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.core.store import open_store

        destination = StorePath.parse(confs["spark.airflow_commit.destination"])
        open_store(destination).write_bytes(destination.join("_SUCCESS"), b"")
        return 0
    from airflow_commit_provider.core.committers import CommitOptions, create_committer
    from airflow_commit_provider.core.store import open_store

    destination = confs["spark.airflow_commit.destination"]
    job_id = confs["spark.airflow_commit.job_id"]
    if mode == "foreign":
        job_id = f"foreign-{job_id}"
    options_ = CommitOptions(
        threads=2, conflict_mode=confs.get("spark.airflow_commit.conflict_mode", "append")
    )
    store = open_store(destination)
    committer = create_committer(
        confs["spark.airflow_commit.committer"], store, destination, job_id, options_
    )
    committer.setup_job()
    results = []
    for task in range(2):
        attempt = committer.task_attempt(task, 0)
        attempt.setup_task()
        with attempt.create_file(f"part-{task:05d}-{job_id}.csv") as stream:
            stream.write(b"id\n" + f"{task}\n".encode() * 10)
        results.append(attempt.commit_task(rows=10))
    if mode == "crash":
        print("fake spark-submit: the driver dies before job commit", flush=True)
        os._exit(3)
    if mode == "hang":
        with open(os.environ["FAKE_SPARK_READY"], "w") as fifo:
            fifo.write("ready\n")
        while True:
            signal.pause()
    committer.commit_job(results)
    print("fake spark-submit: job committed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
