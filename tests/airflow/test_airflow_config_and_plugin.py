"""The provider as Airflow sees it: its ``[airflow_commit]`` options in Airflow's configuration, and
its plugin registered once wherever Airflow loads plugins.

The configuration commands run through Airflow's own CLI parser in this process, as
test_dag_imports.py runs ``providers list``; the plugins are loaded in a fresh interpreter, because
Airflow caches them for the life of the process.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_commit_provider.airflow_config import (
    COMMITS_PER_DESTINATION,
    LOCAL_WORK_ROOT,
    OPTIONS,
    SECTION,
)
from airflow_commit_provider.get_provider_info import get_provider_info

PLUGIN = "airflow_commit_report"


def airflow_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Run ``airflow <argv>`` through Airflow's CLI parser here; its stdout and stderr."""
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(argv)
    capsys.readouterr()
    args.func(args)
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_the_provider_info_declares_every_option_by_airflow_schema() -> None:
    """Airflow validates provider info against its schema; ``config`` is the declaration, whole."""
    import jsonschema
    from airflow.providers_manager import _create_provider_info_schema_validator

    info = get_provider_info()
    _create_provider_info_schema_validator().validate(info)
    options = info["config"][SECTION]["options"]
    assert list(options) == [option.name for option in OPTIONS]
    for option in OPTIONS:
        assert options[option.name] == option.declaration()
        assert set(options[option.name]) == {"description", "version_added", "type", "example", "default"}
    with pytest.raises(jsonschema.ValidationError):  # the validator does check the config block
        broken = {**info, "config": {SECTION: {"options": {"x": {"type": "string"}}}}}
        _create_provider_info_schema_validator().validate(broken)


def test_airflow_config_list_shows_the_section_with_its_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = airflow_command(["config", "list", "--section", SECTION, "--defaults", "--show-values"], capsys)
    assert out.lstrip().startswith(f"[{SECTION}]"), out
    for option in OPTIONS:
        assert f"# {option.name} = {option.default}\n" in out, out
        assert f"# Example: {option.name} = {option.example}\n" in out
        assert f"# Variable: {option.environment_variable}\n" in out
    assert "# Settings of the Commit Protocols provider" in out


def test_airflow_config_get_value_reads_each_option_with_no_warning(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The configured value where one is set (tests/airflow/conftest.py sets the work root), the
    declared default otherwise; "not found in config" was the warning before the declaration."""
    with caplog.at_level(logging.WARNING):
        root, root_err = airflow_command(["config", "get-value", SECTION, LOCAL_WORK_ROOT.name], capsys)
        count, count_err = airflow_command(
            ["config", "get-value", SECTION, COMMITS_PER_DESTINATION.name], capsys
        )
    assert root == os.environ[LOCAL_WORK_ROOT.environment_variable] + "\n"
    assert count == COMMITS_PER_DESTINATION.default + "\n"
    said = root_err + count_err + caplog.text
    assert "not found" not in said and SECTION not in said, said


def test_an_option_reads_through_the_conf_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_commit_provider.compat import conf

    assert COMMITS_PER_DESTINATION.read_count(conf) == int(COMMITS_PER_DESTINATION.default)
    monkeypatch.setenv(COMMITS_PER_DESTINATION.environment_variable, "3")
    assert COMMITS_PER_DESTINATION.read_count(conf) == 3
    for bad in ("0", "ten"):
        monkeypatch.setenv(COMMITS_PER_DESTINATION.environment_variable, bad)
        with pytest.raises(ValueError) as refused:
            COMMITS_PER_DESTINATION.read_count(conf)
        assert str(refused.value) == (
            f"[airflow_commit] commits_per_destination must be a whole number of at least 1, not {bad!r}"
        )


def test_the_operator_reads_its_work_root_through_airflow_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    """The argument, else ``[airflow_commit] local_work_root``, else the default under ``TMPDIR``."""
    from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
    from airflow_commit_provider.tries.workdirs import default_root

    def root(**argument: str) -> str:
        task = CommittedSparkSubmitOperator(
            task_id="write",
            application="/jobs/app.py",
            destination="file:///tmp/t",
            committer="directory",
            **argument,
        )
        return task.local_work_root

    monkeypatch.setenv(LOCAL_WORK_ROOT.environment_variable, "/srv/tries")
    assert (root(), root(local_work_root="/given")) == ("/srv/tries", "/given")
    monkeypatch.setenv(LOCAL_WORK_ROOT.environment_variable, "")
    assert root() == str(default_root())


#: Loads the plugins as the api-server, the scheduler and `airflow plugins` do, and reports what
#: registered and every warning logged meanwhile.
LOAD_PLUGINS = """
import json, logging
warnings = []
class Keep(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger().addHandler(Keep(level=logging.WARNING))
from airflow import plugins_manager
info = plugins_manager.get_plugin_info()
print(json.dumps({
    "names": [plugin["name"] for plugin in info],
    "ours": [plugin for plugin in info if plugin["name"] == "airflow_commit_report"],
    "errors": plugins_manager.get_import_errors(),
    "warnings": warnings,
}, default=str))
"""


def test_the_plugin_registers_once_with_no_warning(tmp_path: Path) -> None:
    """With providers discovered eagerly (``[core] lazy_discover_providers = False``) Airflow reads
    both sources of plugins: the ``airflow.plugins`` entry points, which it reads in every mode, and
    the providers' ``plugins``, where it used to find this plugin a second time and warn. Now it
    registers once, from the entry point (so lazily too), and nothing is warned about.

    Run outside the checkout, as Airflow's services run: from the checkout `python -c` would also
    find a stale ``airflow_commit_provider.egg-info`` there (a second distribution with the same
    entry points; scripts/bootstrap.sh removes it)."""
    env = {**os.environ, "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False"}
    done = subprocess.run(
        [sys.executable, "-c", LOAD_PLUGINS],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["names"].count(PLUGIN) == 1, loaded["names"]
    (ours,) = loaded["ours"]
    assert (
        "value='airflow_commit_provider.ui.plugin:CommitReportPlugin', group='airflow.plugins'"
        in (ours["source"])
    ), ours["source"]
    # The OpenLineage provider registers its plugin both ways too, and is warned about: not ours.
    ours_failed = {source: why for source, why in loaded["errors"].items() if PLUGIN in source + why}
    assert ours_failed == {}, ours_failed
    said = "\n".join(loaded["warnings"]) + done.stderr
    assert PLUGIN not in said and "airflow_commit_provider" not in said, said
