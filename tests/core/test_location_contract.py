"""The location contract: a location a user gives is taken literally after the scheme and bucket,
as Spark/Hadoop's `Path(String)`, the AWS CLI and boto3 take it; URIs stored in manifests and
`_SUCCESS` stay percent-encoded and are decoded only when read from those files."""

from __future__ import annotations

import os

import pytest
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_committed, read_success
from support.workload import CORRECT_COMMITTER_PARAMS, JobRun, skip_unsupported

from airflow_commit_provider.core.paths import InvalidPathError, StorePath

#: Key elements that a URL parser would change: escapes, a bare %, fragment and query marks,
#: spaces, unicode and the `=` of Hive partitions.
TRICKY = ["reports %41", "k=50%25", "100%", "a#b", "q?x=1", "with space", "ünïcødé 日本", "x=y=z"]


@pytest.mark.parametrize("element", TRICKY)
@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_s3_locations_are_taken_literally(scheme: str, element: str) -> None:
    path = StorePath.parse(f"{scheme}://bucket/table/{element}/part.bin")
    assert (path.scheme, path.bucket, path.key) == (scheme, "bucket", f"table/{element}/part.bin")
    assert StorePath.parse(str(path)) == path
    assert StorePath.from_uri(path.uri()) == path


@pytest.mark.parametrize("element", TRICKY)
def test_local_locations_are_taken_literally(tmp_path: os.PathLike[str], element: str) -> None:
    plain = os.path.join(os.fspath(tmp_path), element, "part.bin")
    for location in (plain, f"file://{plain}", f"file://localhost{plain}"):
        path = StorePath.parse(location)
        assert (path.scheme, path.key) == ("file", plain), location
        assert StorePath.parse(str(path)) == path
        assert StorePath.from_uri(path.uri()) == path


def test_a_plain_path_never_becomes_a_url(tmp_path: os.PathLike[str]) -> None:
    for relative in ("odd:name", "x/s3://b/k", "50%25 off"):
        location = os.path.join(os.fspath(tmp_path), relative)
        path = StorePath.parse(location)
        assert path.is_local and path.key == os.path.normpath(location)


def test_stored_uris_are_decoded_as_before() -> None:
    """Old manifests and `_SUCCESS` files hold encoded URIs; they still read."""
    assert StorePath.from_uri("s3a://b/reports%20%2541/k%3Dv").key == "reports %41/k=v"
    assert StorePath.from_uri("file:///tmp/a%23b%3Fc").key == "/tmp/a#b?c"
    with pytest.raises(InvalidPathError, match="fragment"):
        StorePath.from_uri("s3://b/a#b")
    with pytest.raises(InvalidPathError, match="not a URI"):
        StorePath.from_uri("/tmp/plain")


@pytest.mark.parametrize("element", TRICKY)
def test_hdfs_locations_are_taken_literally(element: str) -> None:
    path = StorePath.parse(f"hdfs://nn.example:8020/warehouse/{element}/part.bin")
    assert (path.scheme, path.bucket, path.key) == (
        "hdfs",
        "nn.example:8020",
        f"warehouse/{element}/part.bin",
    )
    assert StorePath.parse(str(path)) == path
    assert StorePath.from_uri(path.uri()) == path


def hadoop_conf(directory: os.PathLike[str], default_fs: str) -> dict[str, str]:
    """An environment whose HADOOP_CONF_DIR holds a core-site.xml naming `default_fs`."""
    with open(os.path.join(directory, "core-site.xml"), "w", encoding="utf-8") as site:
        site.write(
            f"<configuration><property><name>fs.defaultFS</name><value>{default_fs}</value></property></configuration>"
        )
    return {"HADOOP_CONF_DIR": os.fspath(directory)}


def test_hdfs_without_a_namenode_is_on_the_default_filesystem(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hdfs:///t` is `hdfs://<fs.defaultFS's NameNode>/t`, as Hadoop reads it: one spelling, the
    one `_SUCCESS` and Hadoop's manifests name files with."""
    monkeypatch.setenv("HADOOP_CONF_DIR", hadoop_conf(tmp_path, "hdfs://nn.example:8020")["HADOOP_CONF_DIR"])
    assert StorePath.parse("hdfs:///warehouse/t") == StorePath.parse("hdfs://nn.example:8020/warehouse/t")
    hadoop_conf(tmp_path, "file:///")
    with pytest.raises(
        InvalidPathError, match=r"fs.defaultFS in .*core-site.xml is 'file:///', not an hdfs://"
    ):
        StorePath.parse("hdfs:///warehouse/t")
    monkeypatch.delenv("HADOOP_CONF_DIR")
    with pytest.raises(
        InvalidPathError, match=r"^'hdfs:///t' names no NameNode .* HADOOP_CONF_DIR \(not set\)"
    ):
        StorePath.parse("hdfs:///t")


def test_hdfs_and_s3_paths_never_cover_each_other() -> None:
    hdfs, s3 = StorePath.parse("hdfs://b/t"), StorePath.parse("s3://b/t")
    assert not hdfs.join("x").is_under(s3) and not s3.join("x").is_under(hdfs)
    assert StorePath.parse("s3a://b/t/x").is_under(s3)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("", "empty"),
        ("s3:///key", "no bucket"),
        ("gs://b/k", "unsupported scheme"),
        ("file://host/p", "host"),
    ],
)
def test_bad_locations_are_refused_with_the_location_named(location: str, message: str) -> None:
    with pytest.raises(InvalidPathError, match=message) as caught:
        StorePath.parse(location)
    assert location in str(caught.value) or not location


@pytest.mark.parametrize("name", CORRECT_COMMITTER_PARAMS)
def test_tricky_keys_round_trip_through_a_commit(commit_env: CommitEnv, name: str) -> None:
    """A destination and partitions with every tricky element commit under exactly those keys."""
    env = commit_env
    skip_unsupported(name, env.store)
    dest = StorePath.parse(f"{env.root}/{' '.join(TRICKY[:4])}/out")
    assert StorePath.parse(str(dest)) == dest
    job = JobRun.create(name, env.store, dest, env.options())
    job.committer.setup_job()
    attempts = [
        job.run_task(task, 0, [f"{element}/part {task}#?.bin"]) for task, element in enumerate(TRICKY)
    ]
    job.committer.commit_job([attempt.result for attempt in attempts])  # type: ignore[misc]
    expected = {relative: data for attempt in attempts for relative, data in attempt.files.items()}
    assert_committed(env.store, dest, expected, job_id=job.job_id)
    keys = {status.path.key for status in env.store.list_files(dest)}
    for relative in expected:
        assert dest.join(relative).key in keys, f"{relative} is not stored under its literal key"
    listed = {entry.uri for entry in read_success(env.store, dest).iter_all_files(env.store, dest)}
    assert all("%" in uri for uri in listed), "stored URIs stay percent-encoded"
