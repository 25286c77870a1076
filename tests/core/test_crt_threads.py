"""The CRT request path's native threads (`core/store/s3_crt.py`): each keeps one Python thread
state for its whole life (`_keep_thread_state`), which must hold up when threads come and go, when
the process forks after using them, and when the interpreter exits with them still running.

Each case runs in a child process (`support.crt_child`), since a failure there is a crash or a
hang; the child's exit status and what it prints are the verdict, and the timeout only guards
against a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import crt_child

pytest.importorskip("awscrt")
pytestmark = pytest.mark.s3

TESTS = Path(__file__).resolve().parents[1]
#: Longer than any child takes even on a loaded host; reaching it means a hang.
HANG_GUARD = 300


def run_child(embedded_s3: Any, scenario: str, bucket: str) -> dict[str, Any]:
    environment = {
        **os.environ,
        crt_child.ENDPOINT_ENV: embedded_s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": embedded_s3.access_key,
        "AWS_SECRET_ACCESS_KEY": embedded_s3.secret_key,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "support.crt_child", scenario, bucket],
            cwd=TESTS,
            env=environment,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"{scenario}: the child hung (no exit within {HANG_GUARD} s): {hung.stderr!r}")
    assert done.returncode == 0, f"{scenario}: exit status {done.returncode}\n{done.stderr}"
    assert "Fatal Python error" not in done.stderr, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_native_threads_keep_one_thread_state_as_they_come_and_go(embedded_s3: Any, s3_bucket: str) -> None:
    found = run_child(embedded_s3, "threads", s3_bucket)
    # That the groups' native threads ended is the CRT's own word, not a count of the process's
    # threads: each round waits for its group's `shutdown_event` (in `found["ok"]`), which the group
    # signals once its event-loop threads are joined. (A count would race the cleanup thread that
    # signals it and exits just after.)
    assert found["ok"], found
    assert len(found["rounds"]) == crt_child.ROUNDS
    for number, one in enumerate(found["rounds"]):
        # New threads every round, each keeping its state once, though far more callbacks ran.
        assert 1 <= one["keeps"] == one["threads"] < one["callbacks"] / 4, (number, found)


def test_a_forked_child_makes_requests_of_its_own_and_the_parent_goes_on(
    embedded_s3: Any, s3_bucket: str
) -> None:
    found = run_child(embedded_s3, "fork", s3_bucket)
    assert found["child_exitcode"] == 0, found
    assert found["child"] == {"path": "boto3", "ok": True}, "the child's requests go through boto3"
    assert (found["parent_path"], found["parent_ok"]) == ("crt", True)


def test_the_interpreter_exits_cleanly_with_crt_requests_in_flight(embedded_s3: Any, s3_bucket: str) -> None:
    found = run_child(embedded_s3, "shutdown", s3_bucket)
    assert found == {"ok": True, "path": "crt"}
