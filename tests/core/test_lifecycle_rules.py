"""Bucket lifecycle rules that abort incomplete uploads: which reach a destination, how soon they
act, the doctor naming them, and job setup refusing a job that could outlive one before it uploads.

The rules are real lifecycle configurations on the embedded SeaweedFS, which serves
PutBucketLifecycleConfiguration and GetBucketLifecycleConfiguration (and stores filters AWS itself
refuses beside AbortIncompleteMultipartUpload: tags, object sizes). It grants the lifecycle read to
every identity that may read the bucket, so a missing s3:GetLifecycleConfiguration is the one
recorded answer here: AWS's AccessDenied for that call alone, given to a real client by a botocore
``before-call`` handler; every other request still reaches the server.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from botocore.awsrequest import AWSResponse

from airflow_commit_provider import cli
from airflow_commit_provider.cleanup import abort_pending_uploads, clean_stale_temp_trees, prune_old_records
from airflow_commit_provider.core import job_control
from airflow_commit_provider.core.committers import CommitOptions, create_committer
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import LifecycleNotReadableError, Store
from airflow_commit_provider.core.store.check import UploadsOutlivedError
from airflow_commit_provider.core.store.lifecycle import (
    earliest_abort,
    rules_for_destination,
    upload_abort_rules,
)
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.store_doctor import LIFECYCLE, check_store
from airflow_commit_provider.success.check import SuccessExpectations
from airflow_commit_provider.success.listed_files import check_listed_files

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

UPLOAD_COMMITTERS = ("magic", "directory", "partitioned")
HOUR = 3600.0


def abort_rule(rule_id: str, days: int, where: dict[str, Any] | None, **rest: Any) -> dict[str, Any]:
    rule = {
        "ID": rule_id,
        "Status": "Enabled",
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": days},
    }
    return {**rule, **({"Filter": where} if where is not None else {}), **rest}


def put_rules(embedded_s3: EmbeddedS3, bucket: str, *rules: dict[str, Any]) -> None:
    embedded_s3.client().put_bucket_lifecycle_configuration(
        Bucket=bucket, LifecycleConfiguration={"Rules": list(rules)}
    )


def everything_under(store: Store, directory: StorePath) -> list[str]:
    """Every key and every pending upload under `directory`: what a job has left in the store."""
    keys = [status.path.key for status in store.list_files(directory)]
    return keys + [f"upload {upload.path.key}" for upload in store.list_multipart_uploads(directory)]


# How soon a rule acts ----------------------------------------------------------------------------
def test_earliest_abort_rounds_up_to_midnight_utc_as_aws_documents() -> None:
    # AWS's example: created 1/15/2014 10:30 UTC, 3 days: acted on from 1/19/2014 00:00 UTC.
    example = earliest_abort(datetime(2014, 1, 15, 10, 30, tzinfo=timezone.utc), 3)
    assert example == datetime(2014, 1, 19, tzinfo=timezone.utc)
    midnight = datetime(2014, 1, 15, tzinfo=timezone.utc)
    assert earliest_abort(midnight, 1) == midnight + timedelta(days=1)  # the shortest life: days x 24 h
    # Any time of day: at least days x 24 h, less than a day more; an offset-aware time is read as UTC.
    for minutes in range(0, 24 * 60, 15):
        started = midnight + timedelta(minutes=minutes, seconds=59)
        life = earliest_abort(started.astimezone(timezone(timedelta(hours=-7))), 2) - started
        assert timedelta(days=2) <= life < timedelta(days=3), started


# Which rules reach a destination -----------------------------------------------------------------
@pytest.mark.s3
def test_the_rules_that_reach_a_destination(
    embedded_s3: EmbeddedS3, s3_bucket: str, s3_store: S3Store
) -> None:
    destination = StorePath("s3", s3_bucket, "warehouse/events")
    assert s3_store.lifecycle_rules(destination) == []  # NoSuchLifecycleConfiguration: no rules
    put_rules(
        embedded_s3,
        s3_bucket,
        abort_rule("covers", 2, {"Prefix": "warehouse/"}),
        abort_rule("legacy-prefix", 3, None, Prefix="warehouse/ev"),
        abort_rule("inside", 4, {"Prefix": "warehouse/events/day=2"}),
        abort_rule("sized", 5, {"And": {"Prefix": "warehouse/", "ObjectSizeGreaterThan": 1024}}),
        abort_rule("whole-bucket", 9, {}),
        abort_rule("sibling-table", 1, {"Prefix": "warehouse/events1"}),
        abort_rule("other-folder", 1, {"Prefix": "logs/"}),
        abort_rule("tagged", 1, {"Tag": {"Key": "tier", "Value": "scratch"}}),
        abort_rule(
            "prefix-and-tags", 1, {"And": {"Prefix": "warehouse/", "Tags": [{"Key": "a", "Value": "b"}]}}
        ),
        {**abort_rule("disabled", 1, {}), "Status": "Disabled"},
        {"ID": "expires-objects", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}},
    )
    rules = rules_for_destination(upload_abort_rules(s3_store.lifecycle_rules(destination)), destination)
    assert [(rule.rule_id, rule.days) for rule in rules] == [
        ("covers", 2),
        ("legacy-prefix", 3),
        ("inside", 4),
        ("sized", 5),
        ("whole-bucket", 9),
    ]
    assert [rule.rule_id for rule in rules if rule.sized] == ["sized"]
    sibling = StorePath("s3", s3_bucket, "warehouse/events1")
    assert "sibling-table" in {
        r.rule_id
        for r in rules_for_destination(upload_abort_rules(s3_store.lifecycle_rules(sibling)), sibling)
    }


def test_a_rule_without_whole_days_is_refused_naming_it() -> None:
    with pytest.raises(
        ValueError,
        match=r"^lifecycle rule 'odd': .*DaysAfterInitiation must be a positive whole number, got 0$",
    ):
        upload_abort_rules([abort_rule("odd", 0, {})])


# Job setup ---------------------------------------------------------------------------------------
@pytest.mark.s3
@pytest.mark.parametrize("committer", UPLOAD_COMMITTERS)
def test_setup_refuses_a_job_that_would_outlive_a_rule_before_any_upload(
    embedded_s3: EmbeddedS3, s3_bucket: str, s3_store: S3Store, committer: str
) -> None:
    put_rules(embedded_s3, s3_bucket, abort_rule("abort-after-1d", 1, {"Prefix": "warehouse/"}))
    destination = StorePath("s3", s3_bucket, "warehouse/events")
    long_job = create_committer(
        committer, s3_store, destination, str(uuid.uuid4()), CommitOptions(max_job_duration=30 * HOUR)
    )
    with pytest.raises(UploadsOutlivedError) as refused:
        long_job.setup_job()
    message = str(refused.value)
    assert "\n" not in message
    assert (
        f"the {committer} committer cannot write to {destination.uri()}: lifecycle rule 'abort-after-1d'"
        in message
    )
    assert "aborts incomplete uploads 1 day after initiation (at least 24 h)" in message
    assert "the job may run 30 h (its timeout)" in message
    assert everything_under(s3_store, destination) == []  # refused before it wrote or uploaded anything

    job_id = str(uuid.uuid4())
    job = create_committer(
        committer, s3_store, destination, job_id, CommitOptions(max_job_duration=20 * HOUR)
    )
    job.setup_job()
    assert json.loads(s3_store.read_bytes(job.layout.job_marker))["maxJobSeconds"] == 20 * HOUR  # for cleanup
    attempt = job.task_attempt(0, 0)
    with attempt.create_file(f"part-00000-{job_id}.csv") as stream:
        stream.write(b"a,b\n")
    job.commit_job([attempt.commit_task(rows=1)])
    assert s3_store.read_bytes(destination.join(f"part-00000-{job_id}.csv")) == b"a,b\n"


@pytest.mark.s3
def test_a_job_of_unknown_length_is_warned_not_refused(
    embedded_s3: EmbeddedS3, s3_bucket: str, s3_store: S3Store, caplog: pytest.LogCaptureFixture
) -> None:
    put_rules(embedded_s3, s3_bucket, abort_rule("abort-after-1d", 1, {}))
    destination = StorePath("s3", s3_bucket, "t")
    before = s3_store.statistics.snapshot()
    with caplog.at_level(logging.WARNING, logger="airflow_commit_provider.core.store.check"):
        create_committer("magic", s3_store, destination, "unbounded").setup_job()
    assert s3_store.statistics.counters_since(before).counters["op_get_lifecycle"] == 1  # once per job
    [warning] = [r.getMessage() for r in caplog.records]
    assert "lifecycle rule 'abort-after-1d' (the whole bucket)" in warning
    assert "the job's longest duration is unknown" in warning and "must end within 24 h" in warning


# Without permission to read the rules, or a store that does not serve them ----------------------
#: Recorded answers to GetBucketLifecycleConfiguration: AWS's to a role without
#: s3:GetLifecycleConfiguration, and an S3-compatible store's without lifecycle support.
UNREADABLE = {
    "AccessDenied": (403, r"AccessDenied \(s3:GetLifecycleConfiguration is not granted\)"),
    "NotImplemented": (501, r"NotImplemented \(the store does not serve GetBucketLifecycleConfiguration\)"),
}


@pytest.fixture(params=sorted(UNREADABLE))
def denied_store(embedded_s3: EmbeddedS3, request: pytest.FixtureRequest) -> Iterator[tuple[S3Store, str]]:
    """A store whose real client gets a recorded refusal to GetBucketLifecycleConfiguration alone
    (`UNREADABLE`); all else is real. With the message the refusal must give."""
    code = request.param
    status, message = UNREADABLE[code]
    client = embedded_s3.client()
    calls: list[str] = []

    def refused(**kwargs: Any) -> tuple[AWSResponse, dict[str, Any]]:
        calls.append(kwargs["model"].name)
        body = {"Code": code, "Message": "refused"}
        return AWSResponse("", status, {}, None), {
            "Error": body,
            "ResponseMetadata": {"HTTPStatusCode": status},
        }

    client.meta.events.register("before-call.s3.GetBucketLifecycleConfiguration", refused)
    yield S3Store(client=client), message
    assert calls, "the lifecycle read reached the recorded answer"
    client.close()


@pytest.mark.s3
def test_without_permission_the_check_says_so_once_and_goes_on(
    denied_store: tuple[S3Store, str],
    embedded_s3: EmbeddedS3,
    s3_bucket: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, message = denied_store
    destination = StorePath("s3", s3_bucket, "warehouse/events")
    with pytest.raises(LifecycleNotReadableError, match=message):
        store.lifecycle_rules(destination)
    with caplog.at_level(logging.WARNING, logger="airflow_commit_provider.core.store.check"):
        for job_id in ("first", "second"):
            create_committer(
                "magic", store, destination, job_id, CommitOptions(max_job_duration=30 * HOUR)
            ).setup_job()
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"cannot read the lifecycle rules of bucket {s3_bucket}" in warning
    assert "not checked whether its lifecycle rules abort uploads of the magic committer" in warning

    report = check_store(store, destination, writers=2, rounds=1, max_job_duration=30 * HOUR)
    [lifecycle] = [check for check in report.checks if check.name == LIFECYCLE]
    assert (lifecycle.passed, lifecycle.warning) == (True, True)
    assert lifecycle.reason.startswith("not checked: cannot read the lifecycle rules")


# The doctor --------------------------------------------------------------------------------------
@pytest.mark.s3
def test_doctor_flags_a_rule_shorter_than_the_longest_job(
    embedded_s3: EmbeddedS3,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in embedded_s3.env().items():
        monkeypatch.setenv(name, value)
    put_rules(
        embedded_s3,
        s3_bucket,
        abort_rule("abort-after-1d", 1, {"Prefix": "warehouse/"}),
        abort_rule("abort-after-7d", 7, {}),
        abort_rule("other-table", 1, {"Prefix": "warehouse/events1"}),
    )

    def doctor(*argv: str) -> tuple[int, dict[str, Any]]:
        code = cli.main(
            [
                "doctor",
                f"s3://{s3_bucket}/warehouse/events",
                "--writers",
                "2",
                "--rounds",
                "1",
                "--json",
                *argv,
            ]
        )
        report = json.loads(capsys.readouterr().out)
        return code, next(check for check in report["checks"] if check["property"] == LIFECYCLE) | {
            "rules": [(rule["id"], rule["days_after_initiation"]) for rule in report["lifecycle_rules"]]
        }

    code, check = doctor("--max-job-duration", "30h")
    assert (code, check["ok"], check["rules"]) == (1, False, [("abort-after-1d", 1), ("abort-after-7d", 7)])
    assert "a job of 30 h (the longest) outlives 'abort-after-1d':" in check["reason"]
    code, check = doctor("--max-job-duration", "2h")
    assert (code, check["ok"], check["warning"]) == (0, True, False)
    code, check = doctor()
    assert (code, check["ok"], check["warning"]) == (0, True, True)
    assert "the longest job is unknown" in check["reason"] and "a job must end within 24 h" in check["reason"]


# The IAM actions of docs/lifecycle-rules.md -------------------------------------------------------
DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycle-rules.md"
#: Granted by the docs but not called by the work below: records pruning writes a kept job's
#: missing records index entry (jobs from before the index), which these jobs all have.
NOT_EXERCISED = {"cleanup": {"s3:PutObject"}}


def documented_actions() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(the IAM actions of each counted S3 call, the IAM actions of each role), from the doc's tables."""
    by_counter: dict[str, set[str]] = {}
    by_role: dict[str, set[str]] = {}
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            continue
        actions = set(re.findall(r"`(s3:\w+)`", cells[2]))
        counters = re.findall(r"`(op_\w+)`", cells[1])
        for counter in counters:
            by_counter[counter] = actions
        if actions and not counters:
            by_role[cells[0]] = actions
    return by_counter, by_role


@pytest.mark.s3
def test_each_role_calls_only_its_documented_actions(embedded_s3: EmbeddedS3, s3_bucket: str) -> None:
    by_counter, by_role = documented_actions()
    assert set(by_role) == {"writer", "sensor", "cleanup", "doctor"}
    destination = StorePath("s3", s3_bucket, "t")
    put_rules(embedded_s3, s3_bucket, abort_rule("abort-after-7d", 7, {}))

    committed: list[str] = []

    def writer(store: Store) -> None:
        for committer in UPLOAD_COMMITTERS:
            for fate in ("commit", "abort", "fence"):
                job_id = str(uuid.uuid4())
                options = CommitOptions(max_job_duration=HOUR, threads=2)
                job = create_committer(committer, store, destination, job_id, options)
                job.setup_job()
                attempt = job.task_attempt(0, 0)
                with attempt.create_file(f"p=1/part-{job_id}.csv") as stream:
                    stream.write(b"x")
                result = attempt.commit_task(rows=1)
                if fate == "commit":
                    job.commit_job([result])
                    committed.append(job_id)
                    job_control.mark_delivered(store, destination, job_id)
                elif fate == "abort":
                    job.abort_job("failed")
                else:
                    job_control.finish_or_fence(store, destination, job_id, committer)
                job_control.inspect_job(store, destination, job_id)
        dead = create_committer("magic", store, destination, "dead-driver")  # for the cleanup
        dead.setup_job()
        with dead.task_attempt(0, 0).create_file("p=2/part-dead-driver.csv") as stream:
            stream.write(b"y")

    def sensor(store: Store) -> None:
        found = SuccessExpectations(job_id=committed[-1]).check(store, destination)  # from its record
        assert found.state == "accepted" and found.data is not None
        check_listed_files(store, found.data, destination, source="_SUCCESS")

    def cleanup(store: Store) -> None:
        later = datetime.now(timezone.utc) + timedelta(days=40)
        assert abort_pending_uploads(store, destination, older_than="1h", now=later, sizes=True).aborted == 1
        clean_stale_temp_trees(store, destination, older_than="1h", now=later)
        prune_old_records(store, destination, older_than="30d", now=later)

    def doctor(store: Store) -> None:
        assert check_store(store, destination, writers=2, rounds=1, max_job_duration=HOUR).passed

    for role, work in (("writer", writer), ("sensor", sensor), ("cleanup", cleanup), ("doctor", doctor)):
        store = embedded_s3.store()
        work(store)
        called = {name for name in store.statistics.counters if name.startswith("op_")}
        store.close()
        assert called <= set(by_counter), f"{role}: S3 calls the doc's table does not map"
        needed = set().union(*(by_counter[name] for name in called))
        assert needed <= by_role[role], f"{role} calls {sorted(needed - by_role[role])}, not documented"
        assert by_role[role] - needed == NOT_EXERCISED.get(role, set()), f"{role}: granted but never called"
