"""Atheris target: the Airflow names (DAG, task and run IDs, map index, NUL-separated) a try's
job ID and local directory are made from: a usable job ID and one safe directory per name,
under the root, however hostile the names."""

from __future__ import annotations

from pathlib import Path

from support.fuzzing import count, text_of

from airflow_commit_provider.core.layout import validate_job_id
from airflow_commit_provider.tries.plan import TaskKey, try_job_id
from airflow_commit_provider.tries.workdirs import try_workdir_path

MAX_LEN = 512
ROOT = Path("/nonexistent/airflow-commit")


def TestOneInput(data: bytes) -> None:
    dag_id, task_id, run_id, map_index, *_ = [*text_of(data).split("\x00"), "", "", "", ""]
    key = TaskKey(dag_id, task_id, run_id, int(map_index) if map_index.isdecimal() else -1)
    assert validate_job_id(try_job_id(key, 1))
    path = try_workdir_path(ROOT, key, 1)
    assert path.parent.parent.parent.parent == ROOT, path
    assert all(
        part not in ("", ".", "..") and part.isascii() and part.isprintable()
        for part in path.relative_to(ROOT).parts
    ), path
    count("accepted")
