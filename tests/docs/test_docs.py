"""The documentation site builds without a warning, and every code block it shows runs.

- `make docs` (Sphinx, warnings as errors) into a temporary folder;
- the pages hold no inline Python: Python is included from files the suite runs (the example DAGs,
  their jobs, ``snippets.py``), and every inclusion names a file and markers that exist (the build
  checks that too);
- ``snippets.py`` runs on the suite's Spark session, and what it wrote is read back;
- every ``bash`` block of the pages and of README.md runs: ``airflow-commit`` against the embedded
  S3 (bucket ``lake``, holding what the snippets committed), ``make`` targets as a dry run, ``pip
  install`` lines checked against the extras pyproject.toml declares. A command of another kind
  fails the test, so no block goes unchecked.

Cost: the build ~25 s (autodoc imports Airflow; one real commit on local files for the formats
page); the snippets ~3 Spark jobs on the shared session; the CLI lines ~10 s (doctor's probes).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import snippets
import tomllib

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: The Markdown the site and the repository show: the pages and the README (CI runs its test command).
PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
#: The bucket the pages' commands name.
BUCKET = "lake"
DESTINATION = f"s3://{BUCKET}/warehouse/events"
#: Fenced blocks that are output or pictures, not commands: never run.
SHOWN_ONLY = {"text", "json"}
FENCE = re.compile(r"^(?P<fence>```+)(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)\s*$", re.M | re.S)


def fenced_blocks(page: Path) -> Iterator[tuple[str, str, int]]:
    """(language or directive, body, line) of every fenced block of `page`."""
    text = page.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        yield match["info"].strip(), match["body"], text.count("\n", 0, match.start()) + 1


def bash_commands() -> list[tuple[str, str]]:
    """(where, command) for every command line of every bash block, comments removed."""
    commands = []
    for page in PAGES:
        for info, body, line in fenced_blocks(page):
            if info not in ("bash", "sh", "shell", "console"):
                continue
            for offset, command in enumerate(body.splitlines()):
                words = shlex.split(command, comments=True)
                if words:
                    commands.append((f"{page.relative_to(ROOT)}:{line + 1 + offset}", command))
    return commands


def code_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def shown_verbatim(body: str, tested: Path) -> bool:
    """Whether `body` is a run of lines of the file `tested`, indentation aside."""
    shown, source = code_lines(body), code_lines(tested.read_text(encoding="utf-8"))
    return any(source[i : i + len(shown)] == shown for i in range(len(source) - len(shown) + 1))


def test_pages_hold_only_blocks_the_suite_runs() -> None:
    known = {"bash", *SHOWN_ONLY}
    for page in PAGES:
        for info, body, line in fenced_blocks(page):
            directive = re.fullmatch(r"\{([\w-]+)\}.*", info)
            where = f"{page.relative_to(ROOT)}:{line}"
            if directive is None and info == "python" and page.name == "README.md":
                # GitHub renders no includes: the README's Python is a copy of a snippet the suite runs.
                assert shown_verbatim(body, Path(snippets.__file__)), (
                    f"{where}: not a copy of tests/docs/snippets.py"
                )
            elif directive is None:
                assert info in known, f"{where}: a ```{info} block: include Python from a tested file instead"
            elif directive[1] == "literalinclude":
                included = (page.parent / info.split(None, 1)[1]).resolve()
                assert included.is_relative_to(ROOT / "dags_examples") or included == Path(
                    snippets.__file__
                ), f"{where}: includes {included}, which the suite does not run"
    assert bash_commands(), "no bash block found: the collector is broken"


def test_make_docs_builds_without_warnings(tmp_path: Path) -> None:
    build = tmp_path / "site"
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "docs", f"DOCS_BUILD={build}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow-home")},
    )
    assert result.returncode == 0, f"make docs failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    pages = {p.relative_to(build).as_posix() for p in build.rglob("*.html")}
    for page in DOCS.rglob("*.md"):
        assert page.relative_to(DOCS).with_suffix(".html").as_posix() in pages, f"{page} was not built"
    confs = (build / "reference" / "configuration.html").read_text(encoding="utf-8")
    assert "spark.airflow_commit.committer" in confs and "AWS_ENDPOINT_URL_S3" in confs
    formats = (build / "reference" / "formats.html").read_text(encoding="utf-8")
    assert "fileList" in formats and "partitionCount" in formats


@pytest.fixture
def lake(embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The bucket the pages name, on the embedded S3, with this process's environment pointing at it."""
    for name, value in embedded_s3.env().items():
        monkeypatch.setenv(name, value)
    embedded_s3.create_bucket(BUCKET)
    yield BUCKET
    embedded_s3.delete_bucket(BUCKET)  # with everything in it (SeaweedFS allows that)


def days_frame(spark: SparkSession) -> DataFrame:
    rows = [(index, f"2024-01-0{1 + index % 2}", float(index)) for index in range(20)]
    return spark.createDataFrame(rows, "event_id long, dt string, amount double")


@pytest.mark.spark
def test_snippets_and_commands_run(spark: SparkSession, lake: str, tmp_path: Path) -> None:
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store import open_store
    from airflow_commit_provider.success.check import load_success

    df = days_frame(spark)
    snippets.write_to_a_path(df)
    destination = StorePath.parse(DESTINATION)
    store = open_store(destination)
    try:
        committed = load_success(store, destination)
    finally:
        store.close()
    assert committed.committer == "partitioned" and committed.rows == 20
    assert sorted(committed.partitions) == ["dt=2024-01-01", "dt=2024-01-02"]

    by_source = tmp_path / "by_source"
    snippets.write_through_the_data_source(spark, df, str(by_source))
    assert spark.read.parquet(str(by_source)).count() == 20
    assert sorted(p.name for p in by_source.iterdir() if p.name.startswith("dt=")) == [
        "dt=2024-01-01",
        "dt=2024-01-02",
    ]

    run_commands(tmp_path, job_id=committed.job_id)


def run_commands(workdir: Path, job_id: str) -> None:
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
            "optional-dependencies"
        ]
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "JOB_ID": job_id,
    }
    for where, command in bash_commands():
        words = shlex.split(command, comments=True)
        if words[0] == "airflow-commit":
            result = subprocess.run(
                ["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
            )
        elif words[0] == "make":
            result = subprocess.run(
                ["make", "-n", "-C", str(ROOT), *words[1:]], capture_output=True, text=True, timeout=60
            )
        elif words[:2] == ["pip", "install"]:
            named = re.fullmatch(r"airflow-commit-provider(?:\[(?P<extras>[\w,-]+)\])?", words[-1])
            assert named, f"{where}: installs {words[-1]}, not this package"
            unknown = set((named["extras"] or "").split(",")) - extras - {""}
            assert not unknown, f"{where}: extras {unknown} are not in pyproject.toml"
            continue
        else:
            pytest.fail(f"{where}: the docs test does not know how to run {command!r}")
        assert result.returncode == 0, (
            f"{where}: {command} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )


def test_readme_is_a_landing_page() -> None:
    """At most 8,000 characters that link into the site, and the test command CI runs (.ci/run)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= 8000, f"README.md is {len(readme)} characters: move the detail into docs/"
    assert "(docs/index.md)" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci and any(command == "make test" for _, command in readme_commands())


def readme_commands() -> list[tuple[str, str]]:
    return [
        (where, " ".join(shlex.split(command, comments=True)))
        for where, command in bash_commands()
        if where.startswith("README.md")
    ]
