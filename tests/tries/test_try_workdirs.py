"""Tries' local directories: removed once their owners are gone, and nothing outside the root ever.

Owners are real processes holding the directory's lock; "gone" is a real SIGKILL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.tries.workdirs import (
    LOCK_NAME,
    open_try_workdir,
    sweep_stale,
    sweep_task_instance,
    try_workdir_path,
)

KEY = TaskKey("daily/ingest", "write", "scheduled__2024-01-01T00:00:00+00:00", 3)
OTHER = TaskKey("daily", "report", "manual__x", -1)

#: Holds the lock of the directory given, says so, and waits to be killed.
HOLDER = """\
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def leave_behind(root: Path, key: TaskKey, try_number: int) -> Path:
    """What a try that was killed leaves: its directory, its lock file (free) and its zip."""
    path = try_workdir_path(root, key, try_number)
    path.mkdir(parents=True)
    (path / LOCK_NAME).touch()
    (path / "airflow_commit_provider-0.1.0.zip").write_bytes(b"PK")
    return path


def test_a_try_directory_is_named_after_its_task_instance(tmp_path: Path) -> None:
    with open_try_workdir(tmp_path, KEY, 2) as workdir:
        dag, run, task, attempt = workdir.path.relative_to(tmp_path).parts
        assert dag.startswith("daily_ingest-") and run.startswith("scheduled__2024-01-01T00_00_00_00_00-")
        assert (task, attempt) == ("write.3", "try-2")
        # Spark reads --py-files paths as URIs: a ':' would make `scheduled__2024-...T00` a scheme.
        assert re.fullmatch(r"[A-Za-z0-9._/-]+", str(workdir.path.relative_to(tmp_path)))
        assert workdir.path.is_dir()
    assert list(tmp_path.iterdir()) == [], "a try that ends removes its directory and the empty parents"
    lookalike = TaskKey("daily_ingest", KEY.task_id, KEY.run_id, KEY.map_index)
    assert try_workdir_path(tmp_path, lookalike, 2) != try_workdir_path(tmp_path, KEY, 2)


def test_a_new_try_removes_its_instance_s_dead_tries_only(tmp_path: Path) -> None:
    dead = leave_behind(tmp_path, KEY, 1)
    other = leave_behind(tmp_path, OTHER, 1)
    with open_try_workdir(tmp_path, KEY, 2) as workdir:
        assert not dead.exists()
        assert other.exists(), "another task instance's fresh leftover waits for the stale sweep"
        assert sorted(p.name for p in workdir.path.parent.iterdir()) == ["try-2"]


def test_a_directory_held_by_a_live_process_stays_until_it_is_killed(tmp_path: Path) -> None:
    path = leave_behind(tmp_path, KEY, 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert sweep_task_instance(tmp_path, KEY) == []
        assert sweep_stale(tmp_path, timedelta(0)) == []
        assert path.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert sweep_task_instance(tmp_path, KEY) == [path]
    assert list(tmp_path.iterdir()) == []


def test_the_stale_sweep_takes_old_dead_directories_of_any_instance(tmp_path: Path) -> None:
    dead = leave_behind(tmp_path, OTHER, 1)
    assert sweep_stale(tmp_path) == [], "a fresh directory may be one being created: it stays"
    old = dead.stat().st_mtime - 2 * 3600
    os.utime(dead, (old, old))
    with open_try_workdir(tmp_path, KEY, 1) as running:
        assert not dead.exists(), "any new try sweeps stale directories"
        assert sweep_stale(tmp_path, timedelta(0)) == [], "a running try's directory is never taken"
        assert running.path.exists()


def test_nothing_outside_the_root_is_touched(tmp_path: Path) -> None:
    root = tmp_path / "work"
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / LOCK_NAME).touch()
    (outside / "data.csv").write_text("keep me")
    # A link at a try's place, pointing out of the root; and a directory that is not a try's.
    linked = try_workdir_path(root, OTHER, 1)
    linked.parent.mkdir(parents=True)
    linked.symlink_to(outside, target_is_directory=True)
    not_a_try = root / "a" / "b" / "c" / "scratch"
    not_a_try.mkdir(parents=True)
    (tmp_path / "beside.txt").write_text("keep me too")

    assert sweep_stale(root, timedelta(0)) == []
    assert sweep_task_instance(root, OTHER) == []
    assert (outside / "data.csv").read_text() == "keep me"
    assert linked.is_symlink() and not_a_try.is_dir()
    assert (tmp_path / "beside.txt").exists()


def test_a_root_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("making a directory of another user needs root")
    root = tmp_path / "theirs"
    root.mkdir()
    os.chown(root, 65534, 65534)
    with pytest.raises(PermissionError, match="is not a directory of this user"):
        with open_try_workdir(root, KEY, 1):
            pass
