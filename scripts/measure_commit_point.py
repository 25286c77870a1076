"""What an abort leaves after the committing process is SIGKILLed part way through job commit.

The reproduction of issue 10's first seam, with the public core API against the embedded S3:
150 committed task attempts (900 files), `commit_job` in a child process that is SIGKILLed once
about 100 of the new files are visible, then `abort_job()` on the same job. Reports, per
committer, what is visible afterwards, whether `_SUCCESS` exists, how many uploads are pending,
how much of the replaced data survived, and whether the job can still be finished.

    .venv/bin/python scripts/measure_commit_point.py [--kill-at 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import time
import uuid
from typing import Any

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

TASKS, FILES_PER_TASK, PARTITIONS = 150, 6, 5
CASES = [("magic", "append"), ("directory", "append"), ("partitioned", "replace")]


def _relative_keys(store: Any, dest: Any) -> set[str]:
    return {status.path.relative_to(dest) for status in store.list_files(dest)}


def _is_output(relative: str) -> bool:
    return not any(part.startswith(("_", ".")) for part in relative.split("/"))


def _commit_in_child(
    embedded: EmbeddedS3, name: str, dest: str, job_id: str, options: Any, results: list
) -> None:
    create_committer(name, embedded.store(), dest, job_id, options).commit_job(results)


def measure(embedded: EmbeddedS3, bucket: str, name: str, conflict_mode: str, kill_at: int) -> dict[str, Any]:
    store = embedded.store()
    dest = f"s3://{bucket}/{name}-{uuid.uuid4().hex[:8]}/out"
    options = CommitOptions(threads=8, conflict_mode=conflict_mode)
    old = {f"dt={p}/old-{p}-{i}.bin" for p in range(PARTITIONS) for i in range(2)}
    job = create_committer(name, store, dest, uuid.uuid4().hex, options)
    for relative in old:
        store.write_bytes(job.destination.join(relative), b"old\n")
    job.setup_job()
    results = []
    for task in range(TASKS):
        attempt = job.task_attempt(task, 0)
        attempt.setup_task()
        for index in range(FILES_PER_TASK):
            with attempt.create_file(f"dt={task % PARTITIONS}/part-{task:05d}-{index}.bin") as stream:
                stream.write(f"task {task} file {index}\n".encode())
        results.append(attempt.commit_task())
    new = {f"dt={t % PARTITIONS}/part-{t:05d}-{i}.bin" for t in range(TASKS) for i in range(FILES_PER_TASK)}
    child = multiprocessing.get_context("fork").Process(
        target=_commit_in_child, args=(embedded, name, dest, job.job_id, options, results)
    )
    child.start()
    deadline = time.monotonic() + 300
    visible_at_kill = 0
    while child.is_alive() and time.monotonic() < deadline:
        visible_at_kill = len(_relative_keys(store, job.destination) & new)
        if visible_at_kill >= kill_at:
            os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
            break
    child.join()
    abort_result = create_committer(name, store, dest, job.job_id, options).abort_job()
    after = _relative_keys(store, job.destination)
    pending = list(store.list_multipart_uploads(job.destination))
    try:
        create_committer(name, store, dest, job.job_id, options).commit_job(None)
        resumable = "yes"
    except Exception as error:  # the measurement reports any refusal as it is
        resumable = f"no: {type(error).__name__}"
    return {
        "committer": name,
        "conflict_mode": conflict_mode,
        "files": len(new),
        "visible_new_files_at_kill": visible_at_kill,
        "abort_returned": "committed (rolled forward)" if abort_result is not None else "aborted",
        "visible_new_files_after_abort": len(after & new),
        "old_files_after_abort": len(after & old),
        "old_files_before": len(old),
        "other_visible_files": sorted(r for r in after - new - old if _is_output(r)),
        "table_success": "_SUCCESS" in after,
        "pending_uploads": len(pending),
        "commit_job(None) afterwards": resumable,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kill-at", type=int, default=100, help="visible new files at which to SIGKILL")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    with EmbeddedS3() as embedded:
        bucket = embedded.create_bucket("commit-point")
        rows = [measure(embedded, bucket, name, mode, args.kill_at) for name, mode in CASES]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
