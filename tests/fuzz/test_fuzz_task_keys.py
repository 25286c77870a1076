"""Fuzz target: the Airflow names a try's job ID and local directory are made from (DAG, task and
run IDs, map index): any of them gives a usable job ID and one safe directory per name, under the
root, however hostile the name."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import FUZZ, count, hostile_text

from airflow_commit_provider.core.layout import validate_job_id
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.tries.plan import try_job_id
from airflow_commit_provider.tries.workdirs import try_workdir_path

ROOT = Path("/nonexistent/airflow-commit")
names = st.one_of(
    hostile_text, st.sampled_from(("..", ".", "", "a/b", "scheduled__2024-01-01T00:00:00+00:00"))
)


@FUZZ
@given(names, names, names, st.integers(-1, 2**31), st.integers(1, 2**31))
@example("\udc80", "t", "r", -1, 1)
@example("..", "..", "..", -1, 1)
def test_task_keys(dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int) -> None:
    key = TaskKey(dag_id, task_id, run_id, map_index)
    assert validate_job_id(try_job_id(key, try_number))
    path = try_workdir_path(ROOT, key, try_number)
    assert path.parent.parent.parent.parent == ROOT, path
    assert all(
        part not in ("", ".", "..") and part.isascii() and part.isprintable()
        for part in path.relative_to(ROOT).parts
    )
    count("accepted")
