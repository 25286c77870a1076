"""`_SUCCESS` format, URI encoding, tolerant readers, and committers refusing what they cannot do.

- `_SUCCESS` is Hadoop's SuccessData JSON: `name` exactly
  `org.apache.hadoop.fs.s3a.commit.files.SuccessData/1`, the required fields, `filenames` capped at
  100, plus our full `files` list; URIs survive spaces, `%`, unicode and `=`.
- Readers ignore unknown fields (`_SUCCESS`, TaskManifest, PendingSet, and a whole job commit).
- file-v2 refuses to run without `allow_unsafe_v2`; manifest refuses S3 with a clear error.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from support.fixtures import CommitEnv, commit_env_fixture, commit_s3_fixture, scratch_dir_fixture  # noqa: F401
from support.invariants import assert_aborted, assert_committed, is_temp, read_success, store_files
from support.workload import COMMITTER_PARAMS, JobRun, make_options, skip_unsupported

from airflow_commit_provider.core.committers import create_committer
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.manifest import TaskManifest
from airflow_commit_provider.core.formats.pending import PendingSet
from airflow_commit_provider.core.formats.success import SUCCESS_NAME, LegacySuccessMarkerError, SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.stages.task_commit import manifest_digest
from airflow_commit_provider.core.store.base import UnsupportedStoreError

ODD_NAMES = [
    "with space/file name.bin",
    "percent%25/100%.bin",
    "ünïcødé/日本語.bin",
    "year=2024/k=v=w.bin",
    "plus+and&amp;semi;colon.bin",
]
IOSTAT_MAPS = {"counters", "gauges", "minimums", "maximums", "meanstatistics"}


@pytest.mark.parametrize("name", COMMITTER_PARAMS)
def test_success_file_format_and_odd_names(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    first = job.run_task(0, 0, ODD_NAMES[:3])
    second = job.run_task(1, 0, ODD_NAMES[3:])
    returned = job.committer.commit_job([first.result, second.result])
    expected = {**first.files, **second.files}
    assert set(expected) == set(ODD_NAMES)
    parsed = assert_committed(
        env.store, env.dest, expected, job_id=job.job_id
    )  # visible under the exact names

    raw = env.store.read_bytes(env.dest.join("_SUCCESS"))
    obj = json.loads(raw)
    assert obj["name"] == SUCCESS_NAME == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    required = {
        "name": str,
        "timestamp": int,
        "date": str,
        "hostname": str,
        "committer": str,
        "description": str,
        "jobId": str,
        "jobIdSource": str,
        "metrics": dict,
        "diagnostics": dict,
        "filenames": list,
        "iostatistics": dict,
        "success": bool,
        "fileCount": int,
        "partitionCount": int,
        "fileList": dict,
    }
    for field, kind in required.items():
        assert isinstance(obj.get(field), kind), f"_SUCCESS field {field!r} missing or not {kind.__name__}"
    assert obj["committer"] == name
    assert obj["jobId"] == job.job_id
    assert obj["success"] is True
    assert set(obj["iostatistics"]) == IOSTAT_MAPS
    assert obj["iostatistics"]["counters"].get("committer_files_committed") == len(expected)
    assert "files" not in obj, "every file is in the file list, none inline"
    listed = [entry.uri for entry in parsed.iter_all_files(env.store, env.dest)]
    for uri in listed:
        assert " " not in uri and "ü" not in uri, f"URI not percent-encoded: {uri}"
        assert uri.startswith(("file://", "s3://"))
    assert obj["filenames"] == listed, "filenames are the first files in path order, as listed"
    decoded = {StorePath.from_uri(uri).relative_to(env.dest) for uri in listed}
    assert decoded == set(ODD_NAMES)
    assert returned.job_id == parsed.job_id == job.job_id
    assert returned.file_count == parsed.file_count == len(ODD_NAMES)
    assert "%20" in raw.decode() and "%25" in raw.decode()


@pytest.mark.parametrize("name", COMMITTER_PARAMS)
def test_store_requests_reach_task_manifests_and_success(commit_env: CommitEnv, name: str) -> None:
    """As in Hadoop: a task manifest carries its attempt's store requests, and `_SUCCESS` adds the
    committed tasks' up with the job commit's own (here one store serves tasks and driver)."""
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0)
    assert attempt.result is not None
    manifest_path = StorePath.from_uri(attempt.result.manifest)
    with env.store.open_read(manifest_path) as stream:
        task = job.committer.decoder(stream, str(manifest_path), attempt.result.task_id).statistics.counters
    written = task.get("op_put", 0) + task.get("op_multipart_part", 0)
    assert written >= len(attempt.files), f"the attempt's writes are in its manifest: {task}"
    job.committer.commit_job([attempt.result])
    job_counters = read_success(env.store, env.dest).iostatistics.counters
    for request, count in task.items():
        assert job_counters.get(request, 0) >= count, f"{request}: the task's count is in _SUCCESS"
    assert job_counters.get("op_get", 0) > task.get("op_get", 0), "job commit read the manifest"


def test_filenames_capped_at_100_but_the_file_list_lists_all(commit_env: CommitEnv) -> None:
    env = commit_env
    if env.kind == "s3":
        pytest.skip("store-independent; 150 files would only cost requests on S3")
    job = JobRun.create("manifest", env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0, [f"f/{i:04d}.bin" for i in range(150)])
    job.committer.commit_job([attempt.result])
    obj = json.loads(env.store.read_bytes(env.dest.join("_SUCCESS")))
    success = assert_committed(env.store, env.dest, attempt.files, job_id=job.job_id)
    assert len(obj["filenames"]) == 100
    assert obj["fileList"]["entries"] == obj["fileCount"] == 150
    assert obj["filenames"] == [entry.uri for entry in success.iter_all_files(env.store, env.dest)][:100]


@pytest.mark.parametrize("name", COMMITTER_PARAMS)
def test_setup_removes_an_older_success_marker(commit_env: CommitEnv, name: str) -> None:
    """A reader must never pair an old `_SUCCESS` with a new job's partial output."""
    env = commit_env
    skip_unsupported(name, env.store)
    old = JobRun.create(name, env.store, env.dest, env.options())
    old.committer.setup_job()
    kept = old.run_task(0, 0, ["old/part-0.bin"])
    old.committer.commit_job([kept.result])
    new = JobRun.create(name, env.store, env.dest, env.options())
    new.committer.setup_job()
    before = {name: data for name, data in store_files(env.store, env.dest).items() if not is_temp(name)}
    assert "_SUCCESS" not in before
    new.committer.abort_job()
    assert_aborted(env.store, env.dest, before)


@pytest.mark.parametrize("name", COMMITTER_PARAMS)
def test_commit_job_again_is_idempotent(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0)
    first = job.committer.commit_job([attempt.result])
    before = store_files(env.store, env.dest)
    again = job.committer.commit_job([attempt.result])
    resumed = job.committer.commit_job(None)
    assert store_files(env.store, env.dest) == before
    assert again.job_id == resumed.job_id == first.job_id
    assert again.file_count == first.file_count


# Readers ignore unknown fields ----------------------------------------------------------------------
HADOOP_MANIFEST_SUCCESS = {
    "name": SUCCESS_NAME,
    "timestamp": 1713461674003,
    "success": True,
    "date": "2024-04-18T18:34:34.003+01:00[Europe/London]",
    "hostname": "driver-7",
    "committer": "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
    "jobId": "0d7e6c2a-5b1f-4b8e-9f0e-4b2c9d7a1e55",
    "jobIdSource": "spark.sql.sources.writeJobUUID",
    "metrics": {},
    "diagnostics": {"principal": "alice", "stage": "committer_commit_job"},
    "filenames": ["abfs://data@acct.dfs.core.windows.net/events/year=2024/part-00000.snappy.parquet"],
    "iostatistics": {
        "counters": {"committer_files_committed": 1, "op_rename": 2, "op_rename.failures": 1},
        "gauges": {"stage.setup.heap.memory": 73400320},
        "minimums": {"op_rename.min": 139},
        "maximums": {"op_rename.max": 139},
        "meanstatistics": {"op_rename.mean": {"samples": 1, "sum": 139}},
    },
}


def test_success_reader_accepts_hadoop_files_and_ignores_unknown_fields() -> None:
    parsed = SuccessData.from_bytes(json.dumps(HADOOP_MANIFEST_SUCCESS).encode(), "hadoop/_SUCCESS")
    assert parsed.job_id == "0d7e6c2a-5b1f-4b8e-9f0e-4b2c9d7a1e55"
    assert parsed.iostatistics.meanstatistics["op_rename.mean"] == {"samples": 1, "sum": 139}
    old_s3a = {k: v for k, v in HADOOP_MANIFEST_SUCCESS.items() if k != "success"}
    old_s3a.update(committer="magic", state=None, stage=None, filenames=["/events/part-0"])
    assert SuccessData.from_bytes(json.dumps(old_s3a).encode(), "s3a/_SUCCESS").success is True
    ours = SuccessData(committer="magic", job_id="j1", files=[]).to_bytes()
    extended = json.loads(ours)
    extended.update(futureField={"nested": [1, 2]}, anotherOne="x")
    extended["files"] = [{"path": "s3://b/k%20x", "size": 3, "etag": "e", "unknown": True}]
    parsed = SuccessData.from_bytes(json.dumps(extended).encode(), "future/_SUCCESS")
    assert parsed.job_id == "j1" and [f.uri for f in parsed.iter_files()] == ["s3://b/k%20x"]


@pytest.mark.parametrize(
    ("data", "error", "words"),
    [
        (b"", LegacySuccessMarkerError, "0-byte"),
        (b'{"name": "something/else"}', InvalidCommitDataError, "name is"),
        (b"{truncated", InvalidCommitDataError, "not valid JSON"),
        (
            b'{"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1", "files": [{"size": 1}]}',
            InvalidCommitDataError,
            "files",
        ),
        (
            b'{"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1", "lostAttempts": '
            b'[{"taskId": "t", "taskAttemptId": "a", "outcome": "won"}]}',
            InvalidCommitDataError,
            "attempt 'a': outcome 'won' is not one of refused, speculative lost, failed, killed",
        ),
        (
            b'{"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1", "lostAttempts": '
            b'[{"taskId": "t", "taskAttemptId": "a", "outcome": "failed", "start": 9, "end": 2}]}',
            InvalidCommitDataError,
            r"attempt 'a': ends \(2\) before it starts \(9\)",
        ),
        (
            b'{"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1", "lostAttemptsLeftOut": {"t": -1}}',
            InvalidCommitDataError,
            "'lostAttemptsLeftOut' is not an object of counts",
        ),
    ],
)
def test_success_reader_rejects_bad_files_naming_them(data: bytes, error: type, words: str) -> None:
    with pytest.raises(error, match=words) as caught:
        SuccessData.from_bytes(data, "s3://bucket/table/_SUCCESS")
    assert "s3://bucket/table/_SUCCESS" in str(caught.value)


def test_manifest_and_pendingset_readers_ignore_unknown_fields() -> None:
    manifest = json.loads(
        TaskManifest(job_id="j", task_id="t", task_attempt_id="a", task_attempt_dir="file:///x").to_bytes()
    )
    manifest["files"] = [{"s": "file:///x/a", "d": "file:///y/a", "z": 1, "future": 1}]
    manifest["someNewField"] = {"x": 1}
    assert TaskManifest.from_bytes(json.dumps(manifest).encode(), "m.json").files[0].dest == "file:///y/a"
    pendingset = {
        "version": 3,
        "jobId": "j",
        "commits": [
            {
                "version": 2,
                "uri": "s3://b/k",
                "bucket": "b",
                "destinationKey": "k",
                "uploadId": "u",
                "etags": ['"e"'],
                "length": 1,
                "partCount": 1,
                "brandNew": [1],
                "text": None,
                "extraData": None,
            }
        ],
        "extraData": {"task.id": "t"},
        "mystery": True,
    }
    parsed = PendingSet.from_bytes(json.dumps(pendingset).encode(), "p.pendingset")
    assert parsed.commits[0].upload_id == "u" and parsed.task_id == "t"


@pytest.mark.parametrize("name", COMMITTER_PARAMS)
def test_job_commit_ignores_unknown_fields_in_manifests(commit_env: CommitEnv, name: str) -> None:
    env = commit_env
    skip_unsupported(name, env.store)
    job = JobRun.create(name, env.store, env.dest, env.options())
    job.committer.setup_job()
    attempt = job.run_task(0, 0)
    path = job.committer.layout.manifest_path(attempt.handle.task_id)
    obj = json.loads(env.store.read_bytes(path))
    obj["fromTheFuture"] = {"a": [1, 2, 3]}
    for entry in obj.get("files", obj.get("commits")):
        entry["unknownEntryField"] = "ignored"
    written = json.dumps(obj).encode()
    env.store.write_bytes(path, written)
    # As a newer writer's task would report it: its result names the bytes it wrote.
    job.committer.commit_job([dataclasses.replace(attempt.result, digest=manifest_digest(written))])
    assert_committed(env.store, env.dest, attempt.files, job_id=job.job_id)


# Committers refuse what they cannot do safely ----------------------------------------------------------
def test_file_v2_refuses_without_allow_unsafe_v2(commit_env: CommitEnv) -> None:
    env = commit_env
    with pytest.raises(CommitError, match="allow_unsafe_v2") as caught:
        create_committer("file-v2", env.store, env.dest, "job-v2", make_options(allow_unsafe_v2=False))
    assert "partial output" in str(caught.value)
    assert not store_files(env.store, env.root)
    create_committer("file-v2", env.store, env.dest, "job-v2", make_options(allow_unsafe_v2=True))


def test_manifest_committer_refuses_s3_clearly(commit_env: CommitEnv) -> None:
    env = commit_env
    if env.kind == "local":
        create_committer("manifest", env.store, env.dest, "job-m", make_options()).setup_job()
        return
    with pytest.raises(UnsupportedStoreError) as caught:
        create_committer("manifest", env.store, env.dest, "job-m", make_options())
    message = str(caught.value)
    assert "manifest committer" in message and "atomic rename" in message and "S3Store" in message
    assert not store_files(env.store, env.root), "the refused committer wrote something"


def test_unknown_committer_name_lists_the_choices(commit_env: CommitEnv) -> None:
    with pytest.raises(ValueError, match="unknown committer 'staging'") as caught:
        create_committer("staging", commit_env.store, commit_env.dest, "job-x")
    for name in ("directory", "file-v1", "file-v2", "magic", "manifest", "partitioned"):
        assert name in str(caught.value)
