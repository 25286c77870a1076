"""The CLI as `airflow commit-protocols` (the provider info's `cli`, run by Airflow's own parser in
this process) and as `airflow-commit`: one definition, a connection from `AIRFLOW_CONN_*`, every
output format read back, `--version`, and nothing of the commands imported until one runs."""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import yaml

# Airflow is imported here, at collection, as by the other Airflow tests: its logging takes the stdout
# of when it is first imported, which inside a test is that test's capture, closed after it.
from airflow.cli import cli_parser

from airflow_commit_provider.cli import build_parser, main
from airflow_commit_provider.core.paths import StorePath

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

pytestmark = pytest.mark.s3

VERSION_LINE = f"airflow-commit-provider {importlib.metadata.version('airflow-commit-provider')}"
#: The connection the commands name; the environment holds it (with the secret), the command line only its ID.
CONN_ID = "commit_cli_s3"


def airflow_parser() -> argparse.ArgumentParser:
    return cli_parser.get_parser()


def run_airflow(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`airflow *argv` through Airflow's parser and command function, as `airflow`'s main runs it:
    (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        args = airflow_parser().parse_args(list(argv))
        args.func(args)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def commands_of(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Every command under `parser` (`uploads list`, `doctor`, ...) with its option strings and
    positionals' names."""
    found: dict[str, set[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = commands_of(sub)
                if inner:
                    found.update({f"{name} {key}".strip(): value for key, value in inner.items()})
                else:
                    found[name] = {
                        option
                        for a in sub._actions
                        for option in (a.option_strings or [a.metavar or a.dest])
                        if option not in ("-h", "--help")
                    }
    return found


def stable(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what changes from one run to the next (the time it was made, ages)."""
    moving = ("now", "age_seconds")
    return {
        key: [stable(item) for item in value] if key == "uploads" else value
        for key, value in answer.items()
        if key not in moving
    }


@pytest.fixture(scope="module")
def bucket(embedded_s3: EmbeddedS3) -> Iterator[str]:
    """One bucket for the module; each test writes under a prefix of its own."""
    name = embedded_s3.create_bucket(f"cli-{uuid.uuid4().hex[:16]}")
    yield name
    store = embedded_s3.store()
    try:
        root = StorePath.parse(f"s3://{name}/")
        for upload in store.list_multipart_uploads(root):
            store.abort_multipart_upload(upload.path, upload.upload_id)
    finally:
        store.close()
    embedded_s3.delete_bucket(name)


@pytest.fixture
def pending(
    embedded_s3: EmbeddedS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """Two pending uploads under a fresh table and one in its sibling `<table>2` (outside the scope):
    the scope, then each of its uploads' ID and key. The connection `CONN_ID` is in the environment,
    and no AWS_* variable is (only the connection reaches the store)."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", embedded_s3.airflow_connection())
    table = f"s3://{bucket}/{uuid.uuid4().hex[:8]}/t"
    store = embedded_s3.store()
    inside = {}
    try:
        for url in (
            f"{table}/dt=1/part-0.parquet",
            f"{table}/dt=2/part-0.parquet",
            f"{table}2/dt=1/part-0.parquet",
        ):
            path = StorePath.parse(url)
            upload_id = store.create_multipart_upload(path)
            store.upload_part(path, upload_id, 1, b"x" * 100)
            if url.startswith(f"{table}/"):
                inside[upload_id] = path.key
    finally:
        store.close()
    yield {"scope": table, **inside}


def test_airflow_commit_protocols_help_lists_the_same_commands_as_airflow_commit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_airflow(capsys, "commit-protocols", "--help")
    assert code == 0
    for group in ("uploads", "temp", "success", "records", "doctor", "report"):
        assert group in out
    assert "dev-s3" not in out

    [airflow_group] = [
        sub
        for action in airflow_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
        if name == "commit-protocols"
    ]
    ours, theirs = commands_of(build_parser()), commands_of(airflow_group)
    assert ours == theirs, "one definition: the same commands with the same arguments"
    assert "dev-s3" not in ours and len(ours) == 11
    for command, options in ours.items():
        assert {"--aws-conn-id", "-o", "--output", "--version"} <= options, command
    assert {"--job-id"} <= ours["report"] and "--job" not in ours["report"]


def test_uploads_list_through_airflow_with_a_connection_from_the_environment(
    embedded_s3: EmbeddedS3, pending: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    scope = pending.pop("scope")
    argv = ["commit-protocols", "uploads", "list", scope, "--older-than", "0s", "--aws-conn-id", CONN_ID]
    code, out, err = run_airflow(capsys, *argv, "-o", "json")
    assert code == 0, err
    listing = json.loads(out)
    assert {u["upload_id"]: u["key"] for u in listing["uploads"]} == pending, "the scope's uploads, not t2's"
    assert listing["count"] == 2 and listing["bytes"] == 200
    assert embedded_s3.secret_key not in out + err, "the connection's secret is never printed"

    # Exit statuses reach Airflow's `main`: a missing connection is a one-line error, status 2.
    code, out, err = run_airflow(capsys, *argv[:-1], "no_such_conn")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--aws-conn-id no_such_conn: no such connection" in err
    assert "AIRFLOW_CONN_NO_SUCH_CONN" in err


def test_every_output_format_reads_back_as_the_json(
    embedded_s3: EmbeddedS3, pending: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o json|yaml|plain|table` of one listing under `airflow-commit`, the connection resolved
    without a metadata database: yaml is the JSON document, plain its items, table a row each."""
    scope = pending.pop("scope")
    answers = {}
    for output in ("json", "yaml", "plain", "table"):
        argv = ["uploads", "list", scope, "--older-than", "0s", "--aws-conn-id", CONN_ID, "-o", output]
        assert main(argv) == 0
        answers[output], err = capsys.readouterr()
        assert embedded_s3.secret_key not in answers[output] + err
    document = stable(json.loads(answers["json"]))
    assert stable(yaml.safe_load(answers["yaml"])) == document
    rows = [stable(row) for row in csv.DictReader(answers["plain"].splitlines(), delimiter="\t")]
    assert rows == [
        {key: "" if v is None else str(v) for key, v in item.items()} for item in document["uploads"]
    ]
    assert {row["upload_id"] for row in rows} == set(pending)
    table = answers["table"].splitlines()
    assert table[0].split() == ["INITIATED", "AGE", "PARTS", "SIZE", "KEY", "UPLOAD-ID"]
    for upload_id, key in pending.items():
        [row] = [line for line in table if upload_id in line]
        assert row.split()[-2:] == [key, upload_id]


def test_a_single_record_in_every_format(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A command answering one record (`records reindex`): yaml is its JSON, plain one field a line."""
    destination = tmp_path / "table"
    destination.mkdir()
    answers = {}
    for output in ("json", "yaml", "plain"):
        assert main(["records", "reindex", str(destination), "-o", output]) == 0
        answers[output] = capsys.readouterr().out
    document = json.loads(answers["json"])
    assert document and yaml.safe_load(answers["yaml"]) == document
    fields = dict(line.split("\t", 1) for line in answers["plain"].splitlines())
    plain = {
        k: "" if v is None else json.dumps(v) if isinstance(v, (dict, list)) else str(v)
        for k, v in document.items()
    }
    assert fields == plain


def test_version_and_the_json_alias(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    for argv in (["--version"], ["uploads", "list", "--version"], ["doctor", "--version"]):
        assert main(argv) == 0
        assert capsys.readouterr().out == VERSION_LINE + "\n"
    code, out, _ = run_airflow(capsys, "commit-protocols", "temp", "list", "--version")
    assert (code, out) == (0, VERSION_LINE + "\n")
    # Without -o, the answer for people under both programs (Airflow adds --json before -o: it sorts them).
    assert main(["temp", "list", str(tmp_path)]) == 0
    ours = capsys.readouterr().out
    code, theirs, _ = run_airflow(capsys, "commit-protocols", "temp", "list", str(tmp_path))
    assert code == 0 and ours == theirs and ours.startswith("0 temporary trees under file://")
    # --json, the first spelling of -o json, still answers in JSON (unlisted).
    assert main(["temp", "list", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trees"] == []
    assert main(["temp", "list", "--help"]) == 0
    usage = capsys.readouterr().out
    assert "--json" not in usage and "-o (table, json, yaml, plain)" in usage


def test_the_provider_info_and_its_cli_import_none_of_the_commands() -> None:
    """Airflow calls the provider's `cli` function whenever any `airflow` command starts, and
    `airflow-commit` imports its package first: neither may import what runs a command (but Airflow's
    own modules, rich among them) or, for `airflow-commit`, Airflow."""
    probe = """
import json, sys
from airflow_commit_provider.get_provider_info import get_provider_info
info = get_provider_info()
after_info = set(sys.modules)
import airflow_commit_provider.cli
after_cli_package = set(sys.modules)
import airflow.cli.cli_config
before_cli = set(sys.modules)
module, _, function = info["cli"][0].rpartition(".")
commands = getattr(__import__(module, fromlist=[function]), function)()
print(json.dumps({
    "info": sorted(after_info), "package": sorted(after_cli_package), "cli": sorted(set(sys.modules) - before_cli),
    "commands": [c.name for c in commands],
}))
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert loaded["commands"] == ["commit-protocols"]
    # Nothing that runs a command: the AWS libraries, rich, the committers and cleanups (core, cleanup:
    # their import took 0.5-0.9 s under load), the hooks, the command groups and what they share.
    groups = ("uploads", "temp", "success", "records", "doctor", "report", "cleanup", "output", "arguments")
    forbidden = (
        "boto3",
        "botocore",
        "rich",
        "yaml",
        *(
            f"airflow_commit_provider.{room}"
            for room in ("core", "cleanup", "hooks", "store_doctor", "report")
        ),
        *(f"airflow_commit_provider.cli.{group}" for group in groups),
    )
    for stage in ("info", "package", "cli"):
        imported = [m for m in loaded[stage] if any(m == f or m.startswith(f + ".") for f in forbidden)]
        assert imported == [], f"{stage}: {imported}"
    assert not [m for m in loaded["package"] if m == "airflow" or m.startswith("airflow.")], (
        "airflow-commit does not import Airflow (its configuration, its logging) unless --aws-conn-id"
    )
