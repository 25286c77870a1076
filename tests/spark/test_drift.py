"""Guards against a broken PySpark install: pyspark and pyspark-client share one `pyspark/` folder,
and a version drift between them breaks Python UDFs and mapInArrow with a Py4JError."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pyarrow as pa
import pytest


def test_pyspark_and_pyspark_client_versions_match():
    import pyspark

    from airflow_commit_provider.spark.install_check import pyspark_install_problems

    assert pyspark_install_problems() == []
    assert pyspark.__version__ == metadata.version("pyspark"), (
        "the pyspark/ folder is not the installed release"
    )


def test_a_drifted_install_is_named(monkeypatch):
    """pip lets pyspark 4.3.0 sit beside pyspark-client 4.2.0 (PyPI has no client 4.3.0)."""
    from airflow_commit_provider.spark import install_check

    real = metadata.version
    monkeypatch.setattr(
        install_check.metadata, "version", lambda dist: "4.3.0" if dist == "pyspark" else real(dist)
    )
    problems = install_check.pyspark_install_problems()
    assert problems[0].startswith(f"pyspark 4.3.0 != pyspark-client {real('pyspark-client')}")
    assert any("do not match pyspark 4.3.0" in problem for problem in problems)


@pytest.mark.spark
def test_trivial_map_in_arrow_runs(spark):
    """Fails loudly (Py4JError ... UserDefinedPythonFunction) if the Python side and the JVM jars drifted."""

    def double(batches):
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"id": [value * 2 for value in batch.column(0).to_pylist()]})

    rows = spark.range(5, numPartitions=2).mapInArrow(double, "id long").collect()
    assert sorted(row.id for row in rows) == [0, 2, 4, 6, 8]


def test_importing_the_spark_package_does_not_import_pyspark():
    code = (
        "import sys\n"
        "import airflow_commit_provider.spark as s\n"
        "import airflow_commit_provider.spark.writer, airflow_commit_provider.spark.jvm_committers\n"
        "import airflow_commit_provider.spark.config, airflow_commit_provider.spark.formats\n"
        "assert callable(s.write_committed) and callable(s.jvm_committer_conf)\n"
        "assert not [m for m in sys.modules if m == 'pyspark' or m.startswith('pyspark.')], 'pyspark imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
