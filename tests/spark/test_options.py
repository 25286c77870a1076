"""Writer options, defaults, job IDs, credentials and early refusals."""

from __future__ import annotations

import logging
import pickle
from datetime import timedelta

import pytest
from spark_hooks import ExpectLocalProperty, instrumented_write
from spark_support import read_local, rows_of, sample_df, visible_files

from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.check import UploadsOutlivedError
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.spark import default_committer, write_committed
from airflow_commit_provider.spark.config import CONF_JOB_ID, SparkConf
from airflow_commit_provider.spark.instrumentation import TaskInstrumentation, WriteInstrumentation
from airflow_commit_provider.spark.write_options import parse_options, resolve_s3_settings

pytestmark = pytest.mark.spark


def _files(path) -> dict[str, int]:
    return visible_files(LocalStore(), StorePath.parse(str(path)))


@pytest.mark.parametrize(
    ("fmt", "compression", "suffix"),
    [
        ("parquet", None, ".snappy.parquet"),
        ("parquet", "gzip", ".gz.parquet"),
        ("parquet", "none", ".parquet"),
        ("orc", None, ".zstd.orc"),
        ("orc", "snappy", ".snappy.orc"),
        ("csv", None, ".csv"),
        ("csv", "gzip", ".csv.gz"),
        ("json", "bzip2", ".json.bz2"),
    ],
)
def test_codecs_and_spark_file_names(spark, tmp_path, fmt, compression, suffix):
    df = sample_df(spark, rows=10)
    options = {"compression": compression} if compression else {}
    summary = write_committed(df, str(tmp_path / "out"), format=fmt, options=options)
    names = sorted(_files(tmp_path / "out"))
    assert names == [f"part-0000{task}-{summary.job_id}-c000{suffix}" for task in range(2)]
    assert rows_of(read_local(spark, fmt, str(tmp_path / "out"), df.schema)) == rows_of(df)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_max_bytes_per_file_rolls_files(spark, tmp_path, fmt):
    df = spark.range(2000, numPartitions=1).selectExpr("id", "repeat(md5(cast(id as string)), 4) AS s")
    limit = 16 * 1024
    summary = write_committed(df, str(tmp_path / "out"), format=fmt, options={"maxBytesPerFile": "16k"})
    files = _files(tmp_path / "out")
    assert len(files) >= 4 and summary.files == len(files)
    counters = sorted(int(name.rsplit("-c", 1)[1][:3]) for name in files)
    assert counters == list(range(len(files)))
    # Files close once they reach the limit: only the last may be smaller, none far bigger.
    assert all(size < 3 * limit for size in files.values())
    assert sum(1 for size in files.values() if size < limit) <= 1
    back = read_local(spark, fmt, str(tmp_path / "out"), df.schema)
    assert rows_of(back, ("id", "s")) == rows_of(df, ("id", "s"))


def test_empty_writes(spark, tmp_path):
    df = sample_df(spark, rows=0)
    flat = write_committed(df, str(tmp_path / "flat"))
    assert flat.files == 1 and flat.rows == 0, "partition 0 writes one empty file, as Spark does"
    back = spark.read.parquet(str(tmp_path / "flat"))
    # Spark reads every Parquet column back as nullable.
    assert [(f.name, f.dataType) for f in back.schema] == [(f.name, f.dataType) for f in df.schema]
    assert back.count() == 0
    # Two tasks that both see no rows: only partition 0 writes the empty file.
    filtered = write_committed(sample_df(spark, rows=10).where("id < 0"), str(tmp_path / "filtered"))
    assert filtered.tasks == 2 and filtered.files == 1
    assert sorted(_files(tmp_path / "filtered")) == [f"part-00000-{filtered.job_id}-c000.snappy.parquet"]
    record = load_job_record(LocalStore(), str(tmp_path / "filtered"), filtered.job_id)
    assert record.lost_attempts is None, "a task with nothing to commit was recorded as an attempt that lost"
    partitioned = write_committed(df, str(tmp_path / "partitioned"), partition_by="part")
    assert partitioned.files == 0
    assert (tmp_path / "partitioned" / "_SUCCESS").is_file()


def test_job_id_from_local_property_and_write_uuid(spark, tmp_path):
    context = spark.sparkContext
    context.setLocalProperty(CONF_JOB_ID, "airflow-run-42.task")
    try:
        summary = instrumented_write(
            sample_df(spark, rows=6),
            str(tmp_path / "out"),
            WriteInstrumentation(
                task=TaskInstrumentation(
                    before_commit=ExpectLocalProperty("spark.sql.sources.writeJobUUID", "airflow-run-42.task")
                )
            ),
        )
    finally:
        context.setLocalProperty(CONF_JOB_ID, None)
    assert summary.job_id == "airflow-run-42.task"
    assert all("-airflow-run-42.task-c000" in name for name in _files(tmp_path / "out"))
    assert context.getLocalProperty("spark.sql.sources.writeJobUUID") is None, "local property restored"
    # Without it, every write gets a fresh UUID.
    other = write_committed(sample_df(spark, rows=6), str(tmp_path / "other"))
    assert len(other.job_id) == 36 and other.job_id != summary.job_id


def test_progress_and_summary_logged_and_partition_column_matched_case_insensitively(spark, tmp_path, caplog):
    """One write checks both (each was a Spark job of its own): the column is named "PART"."""
    caplog.set_level(logging.INFO, logger="airflow_commit_provider")
    summary = write_committed(sample_df(spark, rows=8), str(tmp_path / "out"), partition_by="PART")
    messages = [record.getMessage() for record in caplog.records]
    assert any(f"committed {summary.files}/{summary.files} files" in m for m in messages), messages
    assert summary.to_dict()["rows"] == 8
    assert summary.total_seconds >= summary.write_seconds > 0
    assert sorted(summary.partitions) == ["part=a", "part=b c", "part=x%3Dy"], "matched case-insensitively"


@pytest.mark.s3
def test_s3_credentials_from_driver_environment(
    spark, embedded_s3, s3_prefix, monkeypatch, caplog, spark_s3_store
):
    """Executors get endpoint and credentials from the driver's environment, and nothing logs them."""
    for name, value in embedded_s3.env().items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.DEBUG, logger="airflow_commit_provider")
    summary = write_committed(sample_df(spark, rows=6), s3_prefix, format="json")
    assert summary.committer == "magic" and summary.rows == 6
    assert len(visible_files(spark_s3_store, StorePath.parse(s3_prefix))) == 2
    ours = [r for r in caplog.records if r.name.startswith("airflow_commit_provider")]
    assert ours, "the write logs its progress"
    logged = "\n".join(record.getMessage() for record in ours)
    assert embedded_s3.secret_key not in logged and embedded_s3.access_key not in logged


def test_s3_settings_never_show_secrets():
    env = {
        "AWS_ACCESS_KEY_ID": "AKIDSECRETID",
        "AWS_SECRET_ACCESS_KEY": "very-secret",
        "AWS_ENDPOINT_URL": "http://h:1",
    }

    class NoConf:
        def get(self, key):
            return None

    settings = resolve_s3_settings({"s3.region": "eu-west-1"}, NoConf(), env)  # type: ignore[arg-type]
    assert settings.store_kwargs() == {
        "endpoint_url": "http://h:1",
        "aws_access_key_id": "AKIDSECRETID",
        "aws_secret_access_key": "very-secret",
        "region_name": "eu-west-1",
    }
    assert "very-secret" not in repr(settings) and "AKIDSECRETID" not in repr(settings)
    assert pickle.loads(pickle.dumps(settings)) == settings


@pytest.mark.parametrize(
    ("option", "environ", "expected"),
    [
        (None, {}, None),
        ("false", {}, False),
        ("0", {"AWS_CA_BUNDLE": "/ca.pem"}, False),
        ("true", {"AWS_CA_BUNDLE": "/ca.pem"}, None),
        (None, {"AWS_CA_BUNDLE": "/ca.pem"}, "/ca.pem"),
        (None, {"AIRFLOW_COMMIT_S3_VERIFY": "no", "AWS_CA_BUNDLE": "/ca.pem"}, False),
        ("/etc/bundle.pem", {}, "/etc/bundle.pem"),
    ],
)
def test_s3_verify_setting(option, environ, expected):
    class NoConf:
        def get(self, key):
            return None

    options = {} if option is None else {"s3.verify": option}
    settings = resolve_s3_settings(options, NoConf(), environ)  # type: ignore[arg-type]
    assert settings.verify == expected
    assert settings.store_kwargs().get("verify", None) == expected


def test_default_committer():
    local, s3 = StorePath.parse("/data/t"), StorePath.parse("s3://b/t")
    assert default_committer(local, False, "append") == "manifest"
    assert default_committer(s3, True, "append") == "magic"
    assert default_committer(s3, True, "replace") == "partitioned"
    assert default_committer(s3, False, "fail") == "directory"
    assert default_committer(local, True, "fail") == "partitioned"
    # HDFS is a rename store with no multipart uploads: appends by rename, as local files.
    assert default_committer(StorePath.parse("hdfs://nn:8020/t"), True, "append") == "manifest"


def test_refusals_happen_before_any_work(spark, tmp_path):
    df = sample_df(spark, rows=4)
    with pytest.raises(ValueError, match="unknown option"):
        write_committed(df, str(tmp_path / "a"), options={"maxRecordPerFile": 1})
    with pytest.raises(ValueError, match="unknown committer"):
        write_committed(df, str(tmp_path / "a"), committer="s3a")
    with pytest.raises(ValueError, match="all columns"):
        write_committed(df.select("part"), str(tmp_path / "a"), partition_by="part")
    with pytest.raises(ValueError, match=r"not .*in the DataFrame"):
        write_committed(df, str(tmp_path / "a"), partition_by="nope")
    with pytest.raises(ValueError, match="lz4_raw"):
        write_committed(df, str(tmp_path / "a"), options={"compression": "lz4"})
    with pytest.raises(Exception, match="unsafe"):
        write_committed(df, str(tmp_path / "a"), committer="file-v2")
    with pytest.raises(Exception, match="atomic rename"):
        write_committed(
            df, "s3://bucket/t", committer="manifest", options={"s3.endpoint_url": "http://127.0.0.1:9"}
        )
    assert not (tmp_path / "a").exists()


def test_parse_options_keeps_spark_spellings(spark):
    parsed = parse_options(
        {"SEP": ";", "header": "false", "maxRecordsPerFile": "10", "threads": 3, "s3.region": "x"},
        "csv",
        SparkConf(spark),
    )
    assert parsed.writer.format_options == (("SEP", ";"),)
    assert parsed.writer.csv_header is False
    assert parsed.writer.max_records_per_file == 10
    assert parsed.committer == {"threads": 3}
    assert parsed.s3 == {"s3.region": "x"}


def test_the_operators_plan_is_taken_from_the_session_and_refused_once_changed(spark, tmp_path, monkeypatch):
    """The confs the operator hands its application (with their digest) set on the session:
    ``write_committed(df)`` commits by that plan without validating it again; the application
    changing one of them (``spark.conf.set``, a thread's local property) is refused in one line,
    before any work."""
    from airflow_commit_provider.spark import config as cfg
    from airflow_commit_provider.spark import write_plan

    destination = StorePath.parse(str(tmp_path / "out"))
    planned = {
        cfg.CONF_JOB_ID: "try-1.job",
        cfg.CONF_COMMITTER: "manifest",
        cfg.CONF_DESTINATION: str(destination),
        cfg.CONF_ENGINE: "python",
        cfg.CONF_CONFLICT_MODE: "append",
    }
    planned[cfg.CONF_PLAN_DIGEST] = cfg.plan_digest(planned)
    validations = []
    monkeypatch.setattr(write_plan, "resolve", lambda *a, **k: validations.append(a))
    try:
        for key, value in planned.items():
            spark.conf.set(key, value)
        summary = write_committed(sample_df(spark, rows=6))
        assert validations == [], "the driver took the operator's plan as it was checked"
        assert (summary.job_id, summary.committer, summary.destination) == (
            "try-1.job",
            "manifest",
            str(destination),
        )
        written = _files(tmp_path / "out")
        assert sorted(written) == [f"part-0000{task}-try-1.job-c000.snappy.parquet" for task in range(2)]

        spark.sparkContext.setLocalProperty(cfg.CONF_CONFLICT_MODE, "fail")
        with pytest.raises(ValueError, match=f"^{cfg.CONF_PLAN_DIGEST} does not match") as refused:
            write_committed(sample_df(spark, rows=6))
        spark.sparkContext.setLocalProperty(cfg.CONF_CONFLICT_MODE, None)
        spark.conf.set(cfg.CONF_COMMITTER, "file-v1")
        with pytest.raises(ValueError, match=f"^{cfg.CONF_PLAN_DIGEST} does not match") as refused:
            write_committed(sample_df(spark, rows=6))
        assert "\n" not in str(refused.value)
        assert _files(tmp_path / "out") == written, "nothing more was written"
    finally:
        spark.sparkContext.setLocalProperty(cfg.CONF_CONFLICT_MODE, None)
        for key in planned:
            spark.conf.unset(key)


@pytest.mark.s3
def test_a_write_that_could_outlive_a_lifecycle_rule_is_refused_before_it_uploads(
    spark, embedded_s3, s3_bucket, s3_options
):
    """The bucket aborts incomplete uploads after a day: a magic write that may take 30 h is refused
    at job setup, before any task runs or uploads, naming the rule; one that takes at most 2 h writes."""
    embedded_s3.client().put_bucket_lifecycle_configuration(
        Bucket=s3_bucket,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "abort-after-1d",
                    "Status": "Enabled",
                    "Filter": {"Prefix": "events/"},
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                }
            ]
        },
    )
    destination, df = StorePath("s3", s3_bucket, "events"), sample_df(spark, rows=8)
    store = embedded_s3.store()
    with pytest.raises(
        UploadsOutlivedError, match=r"rule 'abort-after-1d' .* the job may run 30 h \(its timeout\)"
    ):
        write_committed(
            df, destination.uri(), committer="magic", options=s3_options, max_job_duration=timedelta(hours=30)
        )
    assert list(store.list_files(destination)) == list(store.list_multipart_uploads(destination)) == []
    summary = write_committed(
        df, destination.uri(), committer="magic", options=s3_options, max_job_duration=7200
    )
    assert summary.rows == 8 and len(visible_files(store, destination)) == summary.files > 0
    store.close()
