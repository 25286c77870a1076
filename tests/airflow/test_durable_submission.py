"""Which submission protocol a committed try follows, decided by the Spark provider's own hook
(``operators/durable_submission``), and what it adds to a YARN cluster-mode application.

The connections are real (``AIRFLOW_CONN_*``) and the hooks the provider's; nothing is submitted
here: the provider's refusals come before spark-submit starts. What a retry does with a running
application is tested against the real YARN cluster in tests/hadoop/test_durable_yarn.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_commit_provider.operators.durable_submission import (
    APPLICATION_KEY,
    StoredApplication,
    job_tag,
    submission_mode,
    yarn_cluster_conf,
)
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator

VALUES = {"task_id": "write", "application": "/jobs/app.py", "destination": "s3://b/t", "committer": "magic"}
RM = "http://127.0.0.1:8088"


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch, spark_default: None) -> None:
    def connection(name: str, host: str, **extra: Any) -> None:
        value = {"conn_type": "spark", "host": host, "extra": extra}
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", json.dumps(value))

    connection("yarn_cluster", "yarn", **{"deploy-mode": "cluster"})
    connection(
        "yarn_cluster_rm", "yarn", **{"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": RM}
    )
    connection("yarn_client", "yarn", **{"deploy-mode": "client", "yarn_resourcemanager_webapp_address": RM})
    connection("standalone_cluster", "spark://127.0.0.1:7077", **{"deploy-mode": "cluster"})
    connection("standalone_client", "spark://127.0.0.1:7077")


def mode_of(**arguments: Any) -> Any:
    op = CommittedSparkSubmitOperator(**VALUES, **arguments)
    return submission_mode(op._get_hook(), op.durable)


@pytest.mark.usefixtures("connections")
def test_tracking_and_durability_follow_the_providers_choice() -> None:
    """Durable where the provider tracks the application through the cluster; the log line names
    the protocol: durable, tracked but not durable, or adopt-or-fence alone."""
    yarn = mode_of(conn_id="yarn_cluster_rm", yarn_track_via_rm_api=True)
    assert (yarn.tracking, yarn.durable, yarn.yarn_cluster) == ("yarn", True, True)
    assert yarn.describe().startswith("Durable submission: the application is followed through the YARN")
    not_durable = mode_of(conn_id="yarn_cluster_rm", yarn_track_via_rm_api=True, durable=False)
    assert (not_durable.tracking, not_durable.durable) == ("yarn", False)
    assert not_durable.describe().startswith("Not durable (durable=False)")
    standalone = mode_of(conn_id="standalone_cluster")
    assert (standalone.tracking, standalone.durable, standalone.yarn_cluster) == ("standalone", True, False)
    # spark-submit waits for the application: the adopt-or-fence protocol alone, and the log says so.
    for waits in (
        mode_of(conn_id="yarn_client"),
        mode_of(conn_id="yarn_client", yarn_track_via_rm_api=True),  # RM tracking is cluster mode only
        mode_of(conn_id="standalone_client"),
        mode_of(conn_id="spark_default"),
        mode_of(conn_id="yarn_cluster", durable=False),
    ):
        assert (waits.tracking, waits.durable) == (None, False)
        assert waits.describe().startswith("Durable submission does not apply")
    assert mode_of(conn_id="yarn_cluster", durable=False).yarn_cluster


@pytest.mark.usefixtures("connections")
def test_the_providers_refusals_are_ours_in_one_line() -> None:
    """YARN cluster mode with durable but without RM tracking is refused as the provider refuses it,
    before anything starts; RM tracking without the RM's address too (the provider's own check)."""
    op = CommittedSparkSubmitOperator(**VALUES, conn_id="yarn_cluster")
    with pytest.raises(
        ValueError, match=r"^YARN cluster mode with durable=True requires yarn_track_via_rm_api"
    ):
        op.execute({})
    with pytest.raises(ValueError, match="yarn_resourcemanager_webapp_address") as no_address:
        mode_of(conn_id="yarn_cluster", yarn_track_via_rm_api=True)
    for refused in (no_address,):
        assert "\n" not in str(refused.value)


def test_a_yarn_cluster_application_is_tagged_with_its_job_and_runs_one_am_attempt() -> None:
    job = "0d9f3c1e-5b7a-5c1e-9f0a-1b2c3d4e5f60"
    assert yarn_cluster_conf({}, job) == {"spark.yarn.maxAppAttempts": "1", "spark.yarn.tags": job_tag(job)}
    users = yarn_cluster_conf({"spark.yarn.tags": "team-a, nightly", "spark.yarn.maxAppAttempts": 1}, job)
    assert users["spark.yarn.tags"] == f"team-a,nightly,airflow-commit-job-{job}"
    with pytest.raises(
        ValueError, match=r"^conf spark.yarn.maxAppAttempts=2: a second AM attempt"
    ) as refused:
        yarn_cluster_conf({"spark.yarn.maxAppAttempts": "2"}, job)
    assert "\n" not in str(refused.value)
    assert job_tag(job.upper()) == job_tag(job)  # YARN lower-cases tags; so does the search


def test_the_stored_application_reads_back_and_a_foreign_value_is_refused_naming_the_key() -> None:
    stored = StoredApplication("application_1764400000000_0001", "job-1", 2)
    assert StoredApplication.from_json(stored.to_json()) == stored
    assert StoredApplication.from_json(json.dumps(stored.to_json())) == stored
    kubernetes = StoredApplication("spark-jobs:write-1a2b-driver", "job-2", 1)
    assert StoredApplication.from_json(kubernetes.to_json()) == kubernetes
    for foreign in ("application_1", {"application_id": "a"}, [1, 2], "{not json"):
        with pytest.raises(ValueError, match=rf"^task state store key '{APPLICATION_KEY}' holds"):
            StoredApplication.from_json(foreign)


@pytest.fixture
def kubernetes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``k8s://`` connection, and the provider's hook let past its import check for the
    Kubernetes provider, which this suite does not install: the object put in its place fails on any
    use, so a test that passes reached nothing of Kubernetes."""
    from airflow.providers.apache.spark.hooks import spark_submit

    class Unreachable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"kube_client.{name}: these tests must not reach Kubernetes")

    monkeypatch.setattr(spark_submit, "kube_client", Unreachable(), raising=False)  # absent: never imported
    for name, extra in (
        ("k8s_cluster", {"deploy-mode": "cluster", "namespace": "spark-jobs"}),
        ("k8s_no_namespace", {"deploy-mode": "cluster"}),
        ("k8s_client", {"deploy-mode": "client", "namespace": "spark-jobs"}),
    ):
        value = {"conn_type": "spark", "host": "k8s://https://127.0.0.1:6443", "extra": extra}
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", json.dumps(value))


@pytest.mark.usefixtures("kubernetes")
def test_kubernetes_takes_the_same_path_through_the_providers_hook() -> None:
    """With ``track_driver_via_k8s_api`` a cluster-mode driver pod is followed and stored as the
    provider names it (``namespace:pod``, from spark-submit's own log line), and a retry's hook
    takes an earlier pod as its own (its kill deletes that pod); the provider's refusals hold."""
    tracked = CommittedSparkSubmitOperator(**VALUES, conn_id="k8s_cluster", track_driver_via_k8s_api=True)
    hook = tracked._get_hook()
    mode = submission_mode(hook, tracked.durable)
    assert (mode.tracking, mode.durable, mode.yarn_cluster) == ("kubernetes", True, False)
    assert mode.describe().startswith(
        "Durable submission: the application is followed through the Kubernetes API"
    )
    assert hook.application_id is None
    hook._process_spark_submit_log(iter(["\t pod name: write-1a2b3c-driver"]))  # spark-submit's own line
    assert hook.application_id == "spark-jobs:write-1a2b3c-driver"
    retry = tracked._get_hook()
    retry.attach_application("spark-jobs:write-1a2b3c-driver")
    assert retry._kubernetes_driver_pod == "write-1a2b3c-driver"  # what the provider's on_kill deletes
    assert retry.application_id == hook.application_id

    waits = CommittedSparkSubmitOperator(**VALUES, conn_id="k8s_cluster")
    assert submission_mode(waits._get_hook(), waits.durable).tracking is None  # spark-submit waits
    for conn_id, refusal in (
        ("k8s_no_namespace", "requires a namespace"),
        ("k8s_client", "requires `deploy_mode='cluster'`"),
    ):
        op = CommittedSparkSubmitOperator(**VALUES, conn_id=conn_id, track_driver_via_k8s_api=True)
        with pytest.raises(ValueError, match=refusal) as refused:
            submission_mode(op._get_hook(), op.durable)
        assert "\n" not in str(refused.value)
