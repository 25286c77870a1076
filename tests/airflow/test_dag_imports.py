"""The example DAGs import cleanly, and the provider registers with Airflow."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_commit_provider.assets import partition_keys_supported

EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"


@pytest.fixture(scope="module")
def dagbag():  # type: ignore[no-untyped-def]
    from airflow_commit_provider.compat import dag_bag_class

    DagBag = dag_bag_class()

    return DagBag(dag_folder=str(EXAMPLES))  # Airflow 3.3: examples are never included here


def test_no_import_errors(dagbag) -> None:  # type: ignore[no-untyped-def]
    assert dagbag.import_errors == {}
    assert dagbag.dags, "dags_examples/ holds DAGs"


def test_job_scripts_are_not_parsed_as_dags(dagbag) -> None:  # type: ignore[no-untyped-def]
    assert not any("/jobs/" in path for path in dagbag.file_last_changed)


def test_daily_partitioned_ingest_shape(dagbag) -> None:  # type: ignore[no-untyped-def]
    from airflow_commit_provider.operators import CommittedSparkSubmitOperator
    from airflow_commit_provider.sensors import SuccessManifestSensor

    dag = dagbag.dags.get("daily_partitioned_ingest")  # get_dag() would ask the metadata DB
    assert dag is not None
    assert set(dag.task_ids) == {"land_source_data", "write_partition", "wait_for_success", "check_partition"}
    writer = dag.get_task("write_partition")
    assert isinstance(writer, CommittedSparkSubmitOperator)
    assert (writer.committer, writer.conflict_mode, writer.engine) == ("partitioned", "replace", "python")
    assert Path(writer.application).is_file()
    assert isinstance(dag.get_task("wait_for_success"), SuccessManifestSensor)
    assert dag.get_task("check_partition").upstream_task_ids == {"land_source_data", "wait_for_success"}
    assert dag.max_active_runs >= 4, "days of a backfill commit in parallel (per-partition _SUCCESS)"
    assert f"``max_active_runs={dag.max_active_runs}``" in (dag.doc_md or ""), "the docstring says so"
    assert dag.get_task("wait_for_success").deferrable, (
        "the sensor waits in the triggerer (as docs/dag-authors.md shows)"
    )


def test_daily_partitioned_ingest_ingests_the_day_that_ended(dagbag) -> None:  # type: ignore[no-untyped-def]
    """A scheduled run's logical date (``{{ ds }}``, the day it writes) is the day its run follows.

    Airflow 3's plain ``@daily`` would make the first run at 2024-01-01 00:00 for 2024-01-01 itself.
    """
    from datetime import datetime, timedelta, timezone

    from airflow.timetables.base import TimeRestriction

    dag = dagbag.dags["daily_partitioned_ingest"]
    timetable = dag.timetable
    if not hasattr(timetable, "next_dagrun_info"):  # Airflow 3.2+: the Task SDK's definition
        from airflow.serialization.decoders import decode_timetable
        from airflow.serialization.encoders import encode_timetable

        timetable = decode_timetable(encode_timetable(timetable))
    first = timetable.next_dagrun_info(
        last_automated_data_interval=None,
        restriction=TimeRestriction(earliest=dag.start_date, latest=None, catchup=True),
    )
    day = datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert (first.logical_date, first.data_interval.start) == (day, day)
    assert first.data_interval.end == first.run_after == day + timedelta(days=1), "runs once the day ended"


def test_daily_events_report_schedule(dagbag) -> None:  # type: ignore[no-untyped-def]
    """Partition-aware where tasks emit partition keys (Airflow 3.3), else a plain schedule on the table."""
    from airflow import __version__ as airflow_version
    from packaging.version import Version

    dag = dagbag.dags.get("daily_events_report")
    assert dag is not None
    assert partition_keys_supported() is (Version(Version(airflow_version).base_version) >= Version("3.3"))
    if partition_keys_supported():
        from airflow.sdk import PartitionedAssetTimetable

        assert isinstance(dag.timetable, PartitionedAssetTimetable)
    else:  # Airflow 3.1, 3.2: a partition-aware DAG would never run on events without a key
        # (airflow.timetables.simple's on 3.1, the Task SDK's on 3.2)
        assert type(dag.timetable).__name__ == "AssetTriggeredTimetable", airflow_version


def test_daily_events_report_days() -> None:
    """The days a run reports: its partition key (3.3), else every dt= day its events' extra lists."""
    spec = importlib.util.spec_from_file_location("daily_events_report", EXAMPLES / "daily_events_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def event(*partitions: str, **extra: object) -> SimpleNamespace:
        return SimpleNamespace(extra={"partitions": list(partitions), **extra})

    two_days = [event("dt=2024-01-02"), event("dt=2024-01-01/hour=3", "dt=2024-01-02")]
    assert module.committed_days("2024-01-05", two_days) == ["2024-01-05"]
    assert module.committed_days(None, two_days) == ["2024-01-01", "2024-01-02"]
    assert module.committed_days(None, [event("dt=2024-01-03")]) == ["2024-01-03"]
    with pytest.raises(ValueError, match="no dt= partition"):
        module.committed_days(None, [event("region=eu"), SimpleNamespace(extra=None)])


def test_provider_info_entry_point() -> None:
    import airflow_commit_provider
    from airflow_commit_provider.get_provider_info import get_provider_info

    points = [
        ep
        for ep in importlib.metadata.entry_points(group="apache_airflow_provider")
        if ep.value.startswith("airflow_commit_provider")
    ]
    assert len(points) == 1
    info = points[0].load()()
    assert info == get_provider_info()
    assert info["package-name"] == "airflow-commit-provider"
    assert info["versions"] == [airflow_commit_provider.__version__]
    assert "connection-types" not in info, "the Amazon provider's 'aws' type is reused, not registered again"
    for kind in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[kind]:
            for module in entry["python-modules"]:
                importlib.import_module(module)


def test_airflow_providers_list_shows_the_provider(capsys: pytest.CaptureFixture[str]) -> None:
    """``airflow providers list``, run by Airflow's own CLI parser in this process (the command, not
    the interpreter start-up, is what is checked: the providers come from the same entry points)."""
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(["providers", "list", "--output", "json"])
    capsys.readouterr()
    args.func(args)
    assert '"package_name": "airflow-commit-provider"' in capsys.readouterr().out


def test_provider_triggers_are_registered() -> None:
    from airflow.providers_manager import ProvidersManager

    triggers = {t.trigger_class_name for t in ProvidersManager().trigger}
    assert any("airflow_commit_provider.triggers.success_manifest" in t for t in triggers), triggers
