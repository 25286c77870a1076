"""Partition directory names: our port of Spark's escaping, checked against Spark's JVM code."""

from __future__ import annotations

import pytest

from airflow_commit_provider.core.escaping import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    partition_path,
    unescape_path_name,
)

SAMPLES = [
    "",
    "plain",
    "a=b/c",
    "50% off",
    "%41",
    "with space",
    "ü-unicode-日本-😀",
    "colon:hash#question?star*",
    "quote'\"back\\slash",
    "brace{[]^}|<>~`!@$&()+,;",
    "\x00\x01\x1f\x7f\t\n\r",
    "__HIVE_DEFAULT_PARTITION__",
]


def test_escape_examples():
    assert escape_path_name("a=b/c") == "a%3Db%2Fc"
    assert escape_path_name("50% off") == "50%25 off"
    assert escape_path_name("ü x") == "ü x"
    assert escape_path_name("\x01") == "%01"
    assert escape_path_name("\x00") == "\x00"  # Spark leaves NUL alone
    assert escape_path_name("}|<>") == "}|<>"  # only escaped on Windows
    assert partition_path(["p", "q=r"], ["a/b", None]) == f"p=a%2Fb/q%3Dr={DEFAULT_PARTITION_NAME}"
    assert partition_path(["p"], [""]) == f"p={DEFAULT_PARTITION_NAME}"


@pytest.mark.parametrize("value", SAMPLES)
def test_unescape_inverts_escape(value):
    assert unescape_path_name(escape_path_name(value)) == value


def test_unescape_matches_spark_on_odd_input():
    assert unescape_path_name("100%") == "100%"
    assert unescape_path_name("%zz%4") == "%zz%4"
    assert unescape_path_name("%+F") == "%+F"
    assert unescape_path_name("%-1x") == "%-1x"


@pytest.mark.spark
def test_matches_spark_jvm(spark):
    utils = spark._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    every_char = "".join(chr(code) for code in range(0x00, 0x250))
    for value in [*SAMPLES, every_char]:
        assert escape_path_name(value) == utils.escapePathName(value), repr(value)
        escaped = escape_path_name(value)
        assert unescape_path_name(escaped) == utils.unescapePathName(escaped), repr(value)
    for value in ["a=b", "", "x/y%"]:
        assert partition_path(["p q"], [value]) == utils.getPartitionPathString("p q", value)
    for odd in ["100%", "%zz%4", "%+F", "%-1x", "%4", "%41%4g%%25", "%%41"]:
        assert unescape_path_name(odd) == utils.unescapePathName(odd), odd
