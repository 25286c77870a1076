"""The commit report of a job Hadoop's own committers ran (engine="hadoop"): they keep no records of
ours, so `list_commits`, `load_commit`, `airflow-commit report` and its HTML file read the JSON
`_SUCCESS` they write. One real Spark write each: the manifest committer on ``file://``, S3A's
magic committer on the embedded S3; the report must agree with the files the store holds.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_commit_provider.cli import main
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.report.commit_report import list_commits, load_commit
from airflow_commit_provider.spark import applied_conf, jvm_committer_conf

pytestmark = [pytest.mark.spark, pytest.mark.hadoop_peers]

#: Per committer: a stage of its job commit that its `_SUCCESS` times, and a diagnostic it notes.
EXPECTED = {
    "manifest": ("job_stage_rename_files", "principal"),
    "magic": ("committer_commit_job", "fs.s3a.committer.threads"),
}


@pytest.fixture(scope="module")
def df(spark: Any) -> Any:
    """Rows over two tasks and three partitions whose names need escaping in URIs."""
    rows = [(i, f"v{i}", ("a b", "x%y", "ü")[i % 3]) for i in range(30)]
    return spark.createDataFrame(rows, "id long, v string, p string").repartition(2)


def hadoop_write(
    committer: str, df: Any, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Any, list[str]]:
    """Write `df` through Hadoop's `committer`: (the table's URL, a store on it, the CLI's store arguments)."""
    if committer == "manifest":
        url, spark, store, arguments = (tmp_path / "table").as_uri(), df.sparkSession, LocalStore(), []
        conf = jvm_committer_conf(url, committer)
    else:
        embedded = request.getfixturevalue("embedded_s3")
        spark = request.getfixturevalue("s3a_spark")
        url = f"s3a://{request.getfixturevalue('spark_bucket')}/t-{uuid.uuid4().hex[:12]}"
        store = request.getfixturevalue("spark_s3_store")
        for name, value in embedded.env().items():
            monkeypatch.setenv(name, value)
        arguments = ["--endpoint-url", embedded.endpoint_url]
        conf = jvm_committer_conf(url, committer, job_id=f"job-{uuid.uuid4()}")
    with applied_conf(spark, conf):
        df.write.partitionBy("p").parquet(url)
    return url, store, arguments


@pytest.mark.parametrize("committer", sorted(EXPECTED))
def test_a_hadoop_commit_is_reported_from_its_success(
    committer: str,
    df: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, store, cli_arguments = hadoop_write(committer, df, tmp_path, request, monkeypatch)
    table = StorePath.parse(url)
    success = SuccessData.from_bytes(store.read_bytes(table.join("_SUCCESS")), url)
    data = {s.path.uri(): s.size for s in store.list_files(table) if s.path.name.startswith("part-")}
    assert len(data) >= 3, "every partition holds a file"

    (latest,) = list_commits(store, url)
    assert (latest.job_id, latest.state, latest.committer) == (success.job_id, "committed", success.committer)
    assert (latest.files, latest.bytes) == (len(data), sum(data.values())), "not what the table holds"
    assert latest.finished_at == success.timestamp and latest.origin is None

    report = load_commit(store, url, success.job_id)
    assert report.from_success and report.summary == latest and report.tasks == ()
    assert sorted(f.uri for f in report.files_page) == sorted(data), "the listed files are not the table's"
    assert report.statistics is not None
    stage, diagnostic = EXPECTED[committer]
    timed = {op.name: op for op in report.statistics.timed}
    assert stage in timed, sorted(timed)
    assert timed[stage].count >= 1 and timed[stage].min_ms is not None and timed[stage].max_ms is not None
    assert timed[stage].min_ms <= (timed[stage].mean_ms or 0) <= timed[stage].max_ms
    assert diagnostic in dict(report.statistics.diagnostics)
    with pytest.raises(
        ValueError, match=f"no records of job 'another-job', and .* names job '{success.job_id}'"
    ):
        load_commit(store, url, "another-job")

    page = tmp_path / "report.html"
    assert main(["report", url, "--html", str(page), *cli_arguments]) == 0
    printed = capsys.readouterr().out
    assert success.job_id in printed and "Timed by the committer" in printed and stage in printed
    html = page.read_text(encoding="utf-8")
    assert f"Commit {success.job_id} (committed)" in html
    assert all(f'data-testid="{section}"' in html for section in ("timed", "diagnostics", "files"))
    assert "no records (Hadoop" in html and not re.search(r"""(src|href)=["']?(https?:)?//""", html)
