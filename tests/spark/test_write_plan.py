"""Planning a write without Spark: the registry's `resolve`, `plan_write` from arguments and conf,
and `jvm_committer_conf`, all from the committers' declared traits. No SparkSession is started."""

from __future__ import annotations

import re

import pytest

from airflow_commit_provider.core.committers import COMMITTERS, committer_names, create_committer, resolve
from airflow_commit_provider.core.committers.traits import UnsafeCommitterError
from airflow_commit_provider.core.paths import Destination, InvalidPathError, StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import jvm_committer_conf, plan_write
from airflow_commit_provider.spark.config import (
    CONF_COMMITTER,
    CONF_CONFLICT_MODE,
    CONF_DESTINATION,
    CONF_JOB_ID,
    OPERATOR_CONFS,
)

NO_ENV: dict[str, str] = {}


def test_every_committer_declares_its_traits_once():
    assert list(COMMITTERS) == ["file-v1", "file-v2", "manifest", "directory", "partitioned", "magic"]
    assert committer_names(family="upload") == ("directory", "partitioned", "magic")
    assert committer_names(unsafe=True) == ("file-v2",)
    assert committer_names(exclusive_task_commit=False) == ("file-v1", "file-v2")
    assert committer_names(partition_markers=True) == ("partitioned",)
    assert committer_names(conflicts=None) == ("file-v1", "file-v2", "manifest", "magic")
    assert committer_names(swaps_partitions=True) == ("file-v1", "manifest")


@pytest.mark.parametrize(
    ("destination", "columns", "mode", "expected"),
    [
        ("/data/t", (), "append", "manifest"),
        ("s3://b/t", ("dt",), "append", "magic"),
        ("s3://b/t", ("dt",), "replace", "partitioned"),
        ("s3://b/t", (), "fail", "directory"),
        ("file:///data/t", ("dt",), "fail", "partitioned"),
    ],
)
def test_default_committer_follows_destination_partitioning_and_mode(destination, columns, mode, expected):
    plan = resolve(None, destination, partition_columns=columns, conflict_mode=mode)
    assert plan.committer == expected
    assert plan.committer_conflict_mode == mode and not plan.check_conflicts_before_setup


@pytest.mark.parametrize("committer", committer_names(conflicts=None))
def test_fail_without_a_conflict_resolving_committer_is_checked_before_setup(committer):
    plan = resolve(committer, "/data/t", conflict_mode="fail", allow_unsafe_v2=True)
    assert plan.conflict_mode == "fail"
    assert plan.committer_conflict_mode == "append"
    assert plan.check_conflicts_before_setup


@pytest.mark.parametrize("committer", committer_names(conflicts=None, swaps_partitions=False))
def test_replace_needs_a_committer_that_replaces(committer):
    with pytest.raises(ValueError, match=rf"conflict_mode='replace'.*the {committer} committer cannot"):
        resolve(
            committer, "/data/t", partition_columns=("dt",), conflict_mode="replace", allow_unsafe_v2=True
        )


def test_hadoop_engine_honours_no_conflict_mode_a_jvm_committer_lacks():
    with pytest.raises(ValueError, match=r"the magic committer cannot honour it.*save mode"):
        resolve("magic", "s3a://b/t", conflict_mode="fail", engine="hadoop")
    assert resolve("staging", "s3a://b/t", conflict_mode="fail", engine="hadoop").committer == "directory"


@pytest.mark.parametrize(
    ("committer", "engine", "records"),
    [
        ("magic", "python", True),
        ("manifest", "python", True),
        ("magic", "hadoop", True),
        ("partitioned", "hadoop", True),
        ("manifest", "hadoop", False),
        ("file", "hadoop", False),
    ],
)
def test_which_success_records_the_given_job_id(committer, engine, records):
    destination = "s3a://b/t" if committer in ("magic", "partitioned") else "file:///t"
    assert resolve(committer, destination, engine=engine).records_job_id is records


def test_unsafe_committer_is_refused_alike_by_plan_and_committer(tmp_path):
    with pytest.raises(UnsafeCommitterError, match="allow_unsafe_v2=True") as planned:
        resolve("file-v2", str(tmp_path))
    with pytest.raises(UnsafeCommitterError) as created:
        create_committer("file-v2", LocalStore(), str(tmp_path), "job-1")
    assert str(planned.value) == str(created.value)
    with pytest.raises(ValueError, match="allow_unsafe_v2"):
        jvm_committer_conf("hdfs://nn/t", "file-v2")


def test_plan_write_takes_unset_arguments_from_the_conf():
    conf = {
        CONF_DESTINATION: "s3://lake/events %41",
        CONF_COMMITTER: "Partitioned",
        CONF_CONFLICT_MODE: "REPLACE",
        CONF_JOB_ID: "try-3.job",
    }
    plan = plan_write(None, conf=conf, partition_by="dt", environ=NO_ENV)
    assert plan.commit.committer == "partitioned"
    assert plan.commit.destination.uri == "s3://lake/events %41", "taken literally"
    assert plan.destination.key == "events %41"
    assert plan.commit.partition_columns == ("dt",)
    assert plan.commit_options.conflict_mode == "replace"
    assert plan.job_id == "try-3.job"
    # Arguments win over the conf.
    given = plan_write("/data/out", conf=conf, committer="directory", conflict_mode="append", environ=NO_ENV)
    assert (given.commit.committer, given.commit.conflict_mode) == ("directory", "append")


def test_plan_write_gives_the_committer_the_mode_it_applies():
    plan = plan_write("/data/out", conf={}, committer="manifest", conflict_mode="fail", environ=NO_ENV)
    assert plan.commit.conflict_mode == "fail" and plan.commit.check_conflicts_before_setup
    assert plan.commit_options.conflict_mode == "append"
    assert len(plan.job_id) == 36, "a fresh uuid4 when the conf has none"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "no destination"),
        ({"path": "/d", "committer": "s3a"}, "unknown committer 's3a'"),
        ({"path": "/d", "committer": "magic", "conflict_mode": "replace"}, "cannot honour"),
        ({"path": "/d", "conflict_mode": "overwrite"}, "conflict_mode 'overwrite'"),
        ({"path": "/d", "committer": "file-v2"}, "unsafe"),
        ({"path": "/d", "options": {"maxRecordPerFile": 1}}, "unknown option"),
    ],
)
def test_plan_write_refuses_before_any_work(arguments, message):
    path = arguments.pop("path", None)
    with pytest.raises(ValueError, match=message):
        plan_write(path, conf={}, environ=NO_ENV, **arguments)


def test_an_hdfs_plan_carries_the_drivers_webhdfs_address_and_user(tmp_path):
    """What the tasks receive (``TaskConfig.hdfs``): the address and user resolved from the driver's
    environment, so that executors, whose environment is the NodeManager's, do not resolve them."""
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>fs.defaultFS</name><value>hdfs://nn:8020</value></property></configuration>"
    )
    (tmp_path / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.namenode.http-address</name><value>nn:9870</value></property>"
        "</configuration>"
    )
    environ = {"HADOOP_CONF_DIR": str(tmp_path), "HADOOP_USER_NAME": "etl"}
    plan = plan_write("hdfs://nn:8020/warehouse/t", conf={}, committer="manifest", environ=environ)
    assert plan.hdfs is not None
    assert (plan.hdfs.webhdfs_url, plan.hdfs.user) == ("http://nn:9870", "etl")
    assert plan_write("/data/t", conf={}, environ=NO_ENV).hdfs is None
    with pytest.raises(ValueError, match=r"^hdfs://other:8020/t: no WebHDFS address for hdfs://other:8020"):
        plan_write("hdfs://other:8020/t", conf={}, committer="manifest", environ=environ)


def test_operator_confs_are_the_contract_keys():
    assert all(key.startswith("spark.airflow_commit.") for key in OPERATOR_CONFS)
    assert {CONF_DESTINATION, CONF_JOB_ID, CONF_COMMITTER, CONF_CONFLICT_MODE} <= set(OPERATOR_CONFS)


@pytest.mark.parametrize(
    ("given", "scheme"),
    [
        ("viewfs://cluster/warehouse/events", "viewfs"),
        ("abfss://data@acct.dfs.core.windows.net/events", "abfss"),
        ("gs://bucket/events", "gs"),
    ],
)
def test_a_hadoop_plan_keeps_a_uri_no_store_of_ours_opens(given, scheme):
    """Hadoop's committers write to any Hadoop filesystem: the plan keeps the URI as given, parsed
    once; asking it for a store root is refused in one line naming it. Ours refuse the URI."""
    plan = resolve("manifest", given, engine="hadoop")
    assert (plan.destination.uri, plan.destination.scheme, plan.destination.in_store) == (
        given,
        scheme,
        False,
    )
    assert str(plan.destination) == given
    with pytest.raises(
        InvalidPathError, match=rf"^destination '{re.escape(given)}' is on {scheme}://"
    ) as refused:
        plan.destination.root  # noqa: B018
    assert "\n" not in str(refused.value)
    with pytest.raises(InvalidPathError, match="unsupported scheme"):
        resolve("manifest", given)


@pytest.mark.parametrize(
    ("given", "engine", "uri", "root"),
    [
        ("s3a://lake/events/", "hadoop", "s3a://lake/events/", StorePath("s3a", "lake", "events")),
        ("/data/events", "hadoop", "/data/events", StorePath("file", "", "/data/events")),
        ("s3a://lake/events/", "python", "s3a://lake/events", StorePath("s3a", "lake", "events")),
        ("/data/events", "python", "file:///data/events", StorePath("file", "", "/data/events")),
        ("s3://lake/k=50%25 #1", "python", "s3://lake/k=50%25 #1", StorePath("s3", "lake", "k=50%25 #1")),
    ],
)
def test_a_destination_of_ours_has_its_store_root(given, engine, uri, root):
    """Hadoop's committers get the URI as given; ours the spelling every reader parses back."""
    destination = resolve("magic" if given.startswith("s3") else "manifest", given, engine=engine).destination
    assert (destination.uri, destination.root, destination.in_store) == (uri, root, True)
    if engine == "python":
        assert Destination.parse(destination.uri) == destination, "its URI parses back to it"
