"""CommittedSparkSubmitOperator takes the Spark provider's arguments through, with no copy of its own.

Every argument of the installed ``SparkSubmitOperator.__init__`` gets a value unlike its default;
the provider's operator and ours are built with them, and must keep them alike and hand their
hooks alike (the real ``SparkSubmitHook`` and our subclass, resolving the real ``spark_default``
connection). A provider release adding an argument that ours drops, or keeps under another name,
fails here; so does one whose type this test cannot give a value to, so it is looked at.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import re
import textwrap
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.operators.registration import registration_arguments
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator
from airflow_commit_provider.operators.submission import hook_arguments, try_confs
from airflow_commit_provider.operators.try_outcome import RegistrationPendingError
from airflow_commit_provider.spark import config as cfg

#: Arguments whose value must name a real thing: the connection the fixture defines, a known binary.
REAL_VALUES: dict[str, Any] = {"conn_id": "spark_default", "spark_binary": "spark3-submit"}
#: Deprecated aliases: the provider maps them to another argument (with a warning) and keeps nothing.
ALIASES = ("reconnect_on_retry",)
#: What a hook holds that is its own or a try's, not an argument's: ours adds the S3 and Python environment.
HOOK_STATE = ("_env_vars", "_env")
#: The provider's record of the spark-submit process, which ours keeps behind a property (under a lock).
PROCESS_RECORD = "_submit_sp"


class AuthSentinel:
    """Any object: ``yarn_rm_auth`` is only handed on."""


def provider_arguments() -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(SparkSubmitOperator.__init__).parameters
    return {
        name: p
        for name, p in parameters.items()
        if name != "self" and name not in ALIASES and p.kind is not inspect.Parameter.VAR_KEYWORD
    }


def unlike_default(name: str, parameter: inspect.Parameter) -> Any:
    """A value for `name` that differs from its default, by its annotation."""
    if name in REAL_VALUES:
        return REAL_VALUES[name]
    annotation = str(parameter.annotation)
    if annotation.startswith("bool"):
        return not parameter.default
    if annotation.startswith("int"):
        return 7
    if annotation.startswith("str"):
        return f"{name}-value"
    if annotation.startswith("dict"):
        return {f"spark.test.{name}": "1"}
    if annotation.startswith("list"):
        return [f"{name}-1", f"{name}-2"]
    if "AuthBase" in annotation:
        return AuthSentinel()
    raise AssertionError(f"SparkSubmitOperator has a new argument {name}: {annotation}; give it a value here")


@pytest.fixture
def both(spark_default: None) -> tuple[SparkSubmitOperator, CommittedSparkSubmitOperator]:
    values = {name: unlike_default(name, p) for name, p in provider_arguments().items()}
    values["application"] = "/jobs/app.py"
    provider = SparkSubmitOperator(task_id="provider", **values)
    ours = CommittedSparkSubmitOperator(task_id="ours", destination="s3://b/t", committer="magic", **values)
    return provider, ours


def test_every_provider_argument_is_kept_as_the_provider_keeps_it(
    both: tuple[SparkSubmitOperator, CommittedSparkSubmitOperator],
) -> None:
    provider, ours = both
    kept = vars(provider)
    for name in provider_arguments():
        attributes = [a for a in (name, f"_{name}") if a in kept]
        for attribute in attributes:
            assert vars(ours)[attribute] == kept[attribute], name


def test_every_hook_argument_reaches_our_hook_as_the_providers(
    both: tuple[SparkSubmitOperator, CommittedSparkSubmitOperator],
) -> None:
    provider, ours = both
    theirs, mine = vars(provider._get_hook()), vars(ours._get_hook())
    assert set(mine) >= set(theirs) - {PROCESS_RECORD}
    assert ours._get_hook()._submit_sp is None
    differing = {
        key: (theirs[key], mine[key])
        for key in theirs
        if key not in (*HOOK_STATE, PROCESS_RECORD, "_last_submit_log_lines") and theirs[key] != mine[key]
    }
    assert differing == {}
    assert mine["_env_vars"].items() >= theirs["_env_vars"].items(), "the user's variables are all passed"
    # Not vacuous: the values given are in the hook, not defaults (spot checks of private and public ones).
    assert mine["_yarn_rm_auth"] is vars(provider)["_yarn_rm_auth"]
    assert mine["_yarn_track_via_rm_api"] is True and mine["_name"] == "name-value"


def test_we_pass_every_argument_the_providers_operator_passes_its_hook(
    both: tuple[SparkSubmitOperator, CommittedSparkSubmitOperator],
) -> None:
    """Read from the provider's own ``_get_hook``: the keywords it passes are the ones we pass."""
    source = textwrap.dedent(inspect.getsource(SparkSubmitOperator._get_hook))
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]
    passed = {keyword.arg for call in calls for keyword in call.keywords if keyword.arg}
    assert passed, "the provider's _get_hook passes its arguments by keyword"
    assert set(hook_arguments(both[1])) == passed


def test_templating_is_the_providers() -> None:
    assert set(SparkSubmitOperator.template_fields) <= set(CommittedSparkSubmitOperator.template_fields)
    ours = set(CommittedSparkSubmitOperator.template_fields) - set(SparkSubmitOperator.template_fields)
    commit = {"destination", "table", "committer", "conflict_mode", "engine", "archives"}
    assert ours == commit | {"aws_conn_id", "region_name", "verify"}  # the Amazon provider's AWS fields


def test_table_reaches_the_driver_through_its_conf_key() -> None:
    """``table=`` is templated and handed to the application as ``spark.airflow_commit.table``,
    beside the destination (the table's location, which the driver checks); only the python engine
    registers partitions, so a hadoop try with a table is refused in one line."""
    values = {"task_id": "write", "application": "/jobs/app.py", "destination": "s3://b/events"}
    op = CommittedSparkSubmitOperator(**values, committer="partitioned", table="{{ params.db }}.events")
    op.render_template_fields({"params": {"db": "lake"}})
    conf = op.job_conf("job-1", 2)
    assert (conf[cfg.CONF_TABLE], conf[cfg.CONF_DESTINATION]) == ("lake.events", "s3://b/events")
    assert cfg.CONF_TABLE not in CommittedSparkSubmitOperator(**values, committer="magic").job_conf("j", 1)
    hadoop = CommittedSparkSubmitOperator(**values, committer="magic", engine="hadoop", table="lake.events")
    with pytest.raises(ValueError, match=r"^table='lake.events' needs engine='python'") as refused:
        try_confs(hadoop.write_plan(), "j", table="lake.events", key=None, try_number=1, jvm_options={})
    assert "\n" not in str(refused.value)


def test_the_amazon_providers_aws_arguments_reach_the_store_and_the_spark_job(
    aws_default: Any, s3_bucket: str
) -> None:
    """aws_conn_id, region_name and verify are templated and botocore_config is not, as in the
    Amazon provider's operators; the destination's store and spark-submit's environment both
    carry them (the environment is what `write_committed` builds its tasks' stores from)."""
    from support.aws_arguments import CA_BUNDLE, REGION, TEMPLATED_AWS_ARGUMENTS, render_aws_arguments

    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store.s3 import S3Store
    from airflow_commit_provider.core.store.settings import ENV_S3_BOTOCORE_CONFIG

    destination = f"s3://{s3_bucket}/tables/events"
    op = CommittedSparkSubmitOperator(
        task_id="write",
        application="job.py",
        destination=destination,
        committer="magic",
        botocore_config={"read_timeout": 9},
        **TEMPLATED_AWS_ARGUMENTS,
    )
    render_aws_arguments(op, "aws_default")
    with contextlib.closing(op.hook.get_store(op.write_plan().destination.root)) as store:  # a try's
        assert isinstance(store, S3Store)
        assert (store.region_name, store.verify) == (REGION, CA_BUNDLE)
        assert store.client.meta.config.read_timeout == 9
        assert list(store.list_files(StorePath.parse(destination))) == []  # answered by the real store
    environment = op.hook.spark_environment(destination)
    assert (environment["AWS_DEFAULT_REGION"], environment["AWS_CA_BUNDLE"]) == (REGION, CA_BUNDLE)
    assert json.loads(environment[ENV_S3_BOTOCORE_CONFIG]) == {"read_timeout": 9}


def test_the_registration_application_gets_only_checked_arguments() -> None:
    """Its table and job ID come from the job record in the store, so each is checked before they
    reach a command line: a table that is no table name or a job ID that is no UUID is refused in
    one line naming the job, before anything is submitted."""
    job = "7f1c2a52-9a55-5bb1-8d8a-2d6c9f0e4b11"
    pending = RegistrationPendingError("s3://lake/events", "db.events", job)
    assert registration_arguments(pending) == ["s3://lake/events", "db.events", job]
    assert "registration-only Spark application" in str(pending)
    refused_cases = [
        ("db.events --conf x=y", job, f"job {job}'s record names table 'db.events --conf x=y', which is not"),
        ("--verbose", job, f"job {job}'s record names table '--verbose'"),
        ("db.events", "--verbose", "job ID '--verbose' is not a UUID"),
        ("db.events", job.upper(), "is not a UUID"),
    ]
    for table, job_id, message in refused_cases:
        with pytest.raises(AirflowException, match=re.escape(message)) as refused:
            registration_arguments(RegistrationPendingError("s3://lake/events", table, job_id))
        assert "\n" not in str(refused.value)


# The plan the driver takes from the operator -------------------------------------------------------
def planning_operator() -> CommittedSparkSubmitOperator:
    values = {"task_id": "write", "application": "/jobs/app.py", "destination": "s3://lake/events"}
    return CommittedSparkSubmitOperator(**values, committer=" Partitioned", conflict_mode="replace")


def planned_confs() -> dict[str, str]:
    """The confs a try of the operator hands its application (what the driver's conf holds)."""
    return planning_operator().job_conf("job-1", 2, key=TaskKey("ingest", "write", "run-1", -1))


def counting_resolve(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `resolve` the driver's planning makes (the committer validation), counted."""
    from airflow_commit_provider.spark import write_plan

    calls: list[Any] = []
    real = write_plan.resolve

    def resolve(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(write_plan, "resolve", resolve)
    return calls


def test_the_driver_takes_the_operators_plan_without_validating_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The application's ``write_committed(df)`` plans from the conf the operator set: the plan is
    the operator's (partition columns are the application's), and `resolve` is not called again."""
    from airflow_commit_provider.spark.write_plan import plan_write

    conf = planned_confs()
    calls = counting_resolve(monkeypatch)
    planned = plan_write(None, conf=conf, partition_by="dt", environ={})
    assert calls == [], "the driver did not validate the write again"
    assert planned.commit == replace(planning_operator().write_plan(), partition_columns=("dt",))
    assert planned.job_id == "job-1" and planned.commit_options.origin is not None

    # Arguments that are the plan's keep it; others are the application's own write, checked here.
    plan_write(None, conf=conf, committer="partitioned", conflict_mode="replace", environ={})
    assert calls == []
    plan_write("s3://lake/other", conf=conf, environ={})
    plan_write(None, conf=conf, committer="directory", environ={})
    assert len(calls) == 2
    # Without the operator's digest (a user's own confs), the write is validated as given.
    plan_write(None, conf={k: v for k, v in conf.items() if k != cfg.CONF_PLAN_DIGEST}, environ={})
    assert len(calls) == 3


def test_the_tasks_execution_timeout_reaches_the_drivers_commit_options() -> None:
    """``execution_timeout`` is the longest the try's job may run: the driver's job setup compares it
    with the bucket's lifecycle rules (`CommitOptions.max_job_duration`). Without one, a user's conf
    or ``write_committed``'s option may say it; a value that is no duration is refused naming it."""
    from airflow_commit_provider.spark.write_plan import plan_write

    values = {"task_id": "write", "application": "/jobs/app.py", "destination": "s3://lake/events"}
    timed = CommittedSparkSubmitOperator(**values, committer="magic", execution_timeout=timedelta(hours=30))
    conf = timed.job_conf("job-1", 1)
    assert conf[cfg.CONF_MAX_JOB_DURATION] == "108000"
    assert plan_write(None, conf=conf, environ={}).commit_options.max_job_duration == 30 * 3600
    untimed = CommittedSparkSubmitOperator(**values, committer="magic").job_conf("job-1", 1)
    assert cfg.CONF_MAX_JOB_DURATION not in untimed
    assert plan_write(None, conf=untimed, environ={}).commit_options.max_job_duration is None
    by_option = plan_write(None, conf=untimed, options={"max_job_duration": timedelta(hours=2)}, environ={})
    assert by_option.commit_options.max_job_duration == 7200
    with pytest.raises(
        ValueError, match=rf"^{cfg.CONF_MAX_JOB_DURATION} must be a positive number of seconds"
    ):
        plan_write(None, conf={**untimed, cfg.CONF_MAX_JOB_DURATION: "soon"}, environ={})


@pytest.mark.parametrize(
    "changed",
    [
        {cfg.CONF_COMMITTER: "directory"},
        {cfg.CONF_DESTINATION: "s3://lake/events2"},
        {cfg.CONF_CONFLICT_MODE: "append"},
        {cfg.CONF_JOB_ID: "job-2"},
        {cfg.CONF_TABLE: "lake.events"},
        {cfg.CONF_ENGINE: "hadoop"},
        {cfg.CONF_TRY_NUMBER: "3"},
        {cfg.CONF_PLAN_DIGEST: "0" * 64},
    ],
    ids=lambda changed: next(iter(changed)).removeprefix(cfg.PREFIX),
)
def test_a_conf_changed_after_the_operator_planned_is_refused_in_one_line(changed: dict[str, str]) -> None:
    from airflow_commit_provider.spark.write_plan import plan_write

    conf = {**planned_confs(), **changed}
    with pytest.raises(
        ValueError, match=rf"^{re.escape(cfg.CONF_PLAN_DIGEST)} does not match the confs"
    ) as refused:
        plan_write(None, conf=conf, environ={})
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match=re.escape(cfg.CONF_PLAN_DIGEST)):
        plan_write("s3://lake/elsewhere", conf=conf, environ={})  # whatever the write


def test_a_hadoop_try_is_refused_before_spark_submit_when_a_lifecycle_rule_is_shorter(
    aws_default: Any, spark_default: None, s3_bucket: str
) -> None:
    """engine="hadoop": Hadoop's S3A committers read none of our confs, so the try itself compares
    the bucket's lifecycle rules with its ``execution_timeout`` and never starts spark-submit."""
    from airflow_commit_provider.core.store.check import UploadsOutlivedError

    aws_default.client().put_bucket_lifecycle_configuration(
        Bucket=s3_bucket,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "abort-after-1d",
                    "Status": "Enabled",
                    "Filter": {},
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                }
            ]
        },
    )
    values = {"task_id": "write", "application": "job.py", "destination": f"s3a://{s3_bucket}/events"}
    op = CommittedSparkSubmitOperator(
        **values, committer="magic", engine="hadoop", execution_timeout=timedelta(hours=30)
    )
    with pytest.raises(
        UploadsOutlivedError, match=r"rule 'abort-after-1d' .* the job may run 30 h \(its timeout\)"
    ):
        op.execute(context={})
    assert op._try is not None and op._try.spark_submits == [] and op._try.job_id is None
    assert "Contents" not in aws_default.client().list_objects_v2(Bucket=s3_bucket)
