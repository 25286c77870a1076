"""A committer name reads alike at every entry point: `resolve` alone spells it (case and surrounding
spaces do not count), and the operator, ``write_committed``'s plan, the data source's options, the
CLI's ``success verify --committer`` and ``jvm_committer_conf`` all accept or refuse a spelling together."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import StringType, StructField, StructType
from support.success_files import put, success

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
from airflow_commit_provider.spark import jvm_committer_conf
from airflow_commit_provider.spark.datasource import plan_source_write
from airflow_commit_provider.spark.write_plan import plan_write

ACCEPTED = ["magic", "Magic", "MAGIC", " magic ", "magic\t"]
REFUSED = ["fast", "ma gic", "magic-", " "]


def by_operator(name: str) -> str:
    op = CommittedSparkSubmitOperator(
        task_id="write", application="/jobs/app.py", destination="s3://b/t", committer=name
    )
    return op.write_plan().committer


def by_write_committed(name: str) -> str:
    return plan_write("s3://b/t", conf={}, committer=name).commit.committer


def by_data_source(name: str) -> str:
    schema = StructType([StructField("value", StringType())])
    plan, _, _ = plan_source_write({"path": "s3://b/t", "committer": name}, schema, overwrite=False)
    return plan.commit.committer


def by_jvm_committer_conf(name: str) -> str:
    return jvm_committer_conf("s3a://b/t", name)["spark.hadoop.fs.s3a.committer.name"]


ENTRY_POINTS = [by_operator, by_write_committed, by_data_source, by_jvm_committer_conf]


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", ACCEPTED, ids=repr)
def test_a_spelling_of_magic_is_magic_everywhere(entry: object, name: str) -> None:
    assert entry(name) == "magic"  # type: ignore[operator]


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", REFUSED, ids=repr)
def test_a_name_that_is_no_committer_is_refused_everywhere_in_one_line(entry: object, name: str) -> None:
    with pytest.raises(ValueError, match=r"committer") as refused:
        entry(name)  # type: ignore[operator]
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("name", "code"), [*((n, 0) for n in ACCEPTED), ("fast", 1), ("directory", 1)])
def test_the_cli_checks_a_committer_by_the_same_spelling(
    tmp_path: Path, name: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    table = StorePath.parse(str(tmp_path))
    put(LocalStore(), table, success(table, committer="magic"))
    assert main(["success", "verify", str(tmp_path), "--committer", name]) == code, capsys.readouterr().out


@pytest.mark.parametrize("name", ["manifest", " Manifest ", "MANIFEST"], ids=repr)
def test_the_core_opens_a_committer_by_the_same_spelling(tmp_path: Path, name: str) -> None:
    """What aborts or fences a job from outside its driver (`job_control`) opens it by name too."""
    from airflow_commit_provider.core.committers import create_committer

    assert create_committer(name, LocalStore(), str(tmp_path), "job-1").name == "manifest"
