"""`make demo`: a committed write to the embedded S3, then the `_SUCCESS` summary.

Three tasks write through the magic committer; one is retried after a failed first attempt,
and only the committed attempt's files become visible.
"""

from __future__ import annotations

import json
import uuid

from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.embedded_s3 import EmbeddedS3


def main() -> None:
    with EmbeddedS3() as server:
        bucket = server.create_bucket("demo")
        store = server.store()
        destination = f"s3://{bucket}/tables/events"
        job_id = str(uuid.uuid4())
        committer = create_committer("magic", store, destination, job_id, CommitOptions(threads=8))
        committer.setup_job()
        results = []
        for task in range(3):
            failed = committer.task_attempt(task, 0)
            with failed.create_file(f"part-{task:05d}-{job_id}-c000.csv") as stream:
                stream.write(b"id,value\n")
            failed.abort_task()
            attempt = committer.task_attempt(task, 1)
            with attempt.create_file(f"part-{task:05d}-{job_id}-c000.csv") as stream:
                stream.write(b"id,value\n" + b"".join(f"{task}{i},{i * i}\n".encode() for i in range(1000)))
            results.append(attempt.commit_task(rows=1000))
        committer.commit_job(results)
        success = SuccessData.from_bytes(store.read_bytes(committer.layout.success_marker), destination)
        pending = list(store.list_multipart_uploads(committer.destination))
        print(f"output: {destination}")
        print(f"pending uploads left: {len(pending)}")
        print(json.dumps(success.summary(), indent=2))


if __name__ == "__main__":
    main()
