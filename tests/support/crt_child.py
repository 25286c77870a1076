"""A process that sends S3 requests over the CRT (`core/store/s3_crt.py`), for
tests/core/test_crt_threads.py: `python -m support.crt_child <scenario> <bucket>`.

It runs in a process of its own because what it tests (native threads that keep a Python thread
state for their whole life, a fork after they ran, interpreter shutdown with them still running)
ends in a crash or a hang when it goes wrong, which the test's own process must survive to
report. The embedded S3's endpoint and credentials come from the environment (`ENDPOINT_ENV`,
and boto3's own `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`), never the command line. It prints
one JSON line of what it found; its exit status is the verdict on crashes.
"""

from __future__ import annotations

import ctypes
import gc
import json
import multiprocessing
import os
import sys
import threading
import uuid
from typing import Any

from awscrt import io as crt_io

from airflow_commit_provider.core.commit_operations import CommitOperations, UploadToComplete
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import s3_crt
from airflow_commit_provider.core.store.s3 import S3Store

ENDPOINT_ENV = "CRT_CHILD_S3_ENDPOINT"
#: Requests per round of `threads`, and rounds: enough callbacks that a thread state made per
#: callback, not per thread, shows as many more keeps than threads.
REQUESTS_PER_ROUND = 24
ROUNDS = 6
#: The longest wait for a round's native threads to end (a hang guard, not a measurement).
THREADS_END_WITHIN = 60.0


def store(request_path: str) -> S3Store:
    return S3Store(endpoint_url=os.environ[ENDPOINT_ENV], region_name="us-east-1", request_path=request_path)


def round_trip(target: S3Store, bucket: str, name: str, count: int) -> bool:
    """`count` objects put and read back, and one multipart upload completed through the commit
    operations: whether every byte came back as written."""
    root = StorePath("s3", bucket, f"crt-child/{name}-{uuid.uuid4().hex[:8]}")
    for number in range(count):
        target.write_bytes(root.join(f"o{number}"), f"{name}:{number}".encode())
    read = [target.hot.get_object(bucket, root.join(f"o{number}").key) for number in range(count)]
    same = all(data == f"{name}:{number}".encode() for number, data in enumerate(read))
    operations = CommitOperations(target, threads=4)
    path = root.join("multipart")
    upload_id = operations.initiate(path)
    commit = operations.upload_to_pending(path, upload_id, [b"part" * 100])
    operations.complete_uploads([UploadToComplete(path, upload_id, commit.etags, commit.length)]).checked()
    return same and target.read_bytes(path) == b"part" * 100


def counting_keeps() -> list[int]:
    """The thread of each `PyGILState_Ensure` the kept thread state makes, as they are made."""
    real = ctypes.pythonapi.PyGILState_Ensure
    keeps: list[int] = []

    def ensure() -> Any:
        keeps.append(threading.get_ident())
        return real()

    ctypes.pythonapi.PyGILState_Ensure = ensure
    return keeps


def threads_come_and_go(bucket: str) -> dict[str, Any]:
    """Rounds of requests, each on an event loop group of its own whose native threads end after it.

    Each round's threads keep their Python thread state once each (`_keep_thread_state`): were it
    not kept, the mark that it was would go with the state after each callback, and every callback
    would keep one again. Per round, since a thread's ID may be reused once it has ended.
    """
    keeps = counting_keeps()
    callbacks = 0
    real_done = s3_crt._Response.on_done

    def on_done(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal callbacks
        callbacks += 1
        real_done(self, *args, **kwargs)

    s3_crt._Response.on_done = on_done  # type: ignore[method-assign]
    rounds = []
    ok = True
    for number in range(ROUNDS):
        group = crt_io.EventLoopGroup()
        ended = group.shutdown_event
        s3_crt._bootstrap = (os.getpid(), crt_io.ClientBootstrap(group, crt_io.DefaultHostResolver(group)))
        del group
        kept_before, callbacks_before = len(keeps), callbacks
        target = store("crt")
        ok = round_trip(target, bucket, f"round{number}", REQUESTS_PER_ROUND) and ok
        target.close()
        del target
        s3_crt._bootstrap = None  # the last reference: the group's threads end
        gc.collect()
        ok = ended.wait(THREADS_END_WITHIN) and ok
        kept = keeps[kept_before:]
        rounds.append(
            {"keeps": len(kept), "threads": len(set(kept)), "callbacks": callbacks - callbacks_before}
        )
    return {"ok": ok, "rounds": rounds}


def _forked_child(bucket: str, answers: Any) -> None:
    target = store("auto")
    answers.put({"path": target.hot.name, "ok": round_trip(target, bucket, "child", 8)})


def fork_after_use(bucket: str) -> dict[str, Any]:
    """The parent uses the CRT, forks a child that makes requests of its own, then goes on."""
    parent = store("auto")
    before = round_trip(parent, bucket, "parent-before", 8)
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_forked_child, args=(bucket, answers))
    child.start()
    child.join(THREADS_END_WITHIN)
    if child.is_alive():  # hung: ended here, so its exit status (-9) is the verdict, not a timeout
        child.kill()
        child.join()
    answer = answers.get(timeout=1) if child.exitcode == 0 else None
    after = round_trip(parent, bucket, "parent-after", 8)
    return {
        "parent_path": parent.hot.name,
        "parent_ok": before and after,
        "child_exitcode": child.exitcode,
        "child": answer,
    }


def exit_with_requests_in_flight(bucket: str) -> dict[str, Any]:
    """Requests done and others still in flight, the store never closed, then the interpreter exits."""
    target = store("crt")
    ok = round_trip(target, bucket, "shutdown", 8)
    root = StorePath("s3", bucket, f"crt-child/in-flight-{uuid.uuid4().hex[:8]}")
    operations = CommitOperations(target)
    uploads = [(root.join(f"u{n}"), operations.initiate(root.join(f"u{n}"))) for n in range(16)]
    for path, upload_id in uploads:  # started, never waited for
        target.start_abort_multipart_upload(path, upload_id)
    return {"ok": ok, "path": target.hot.name}


SCENARIOS = {
    "threads": threads_come_and_go,
    "fork": fork_after_use,
    "shutdown": exit_with_requests_in_flight,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](sys.argv[2])), flush=True)
