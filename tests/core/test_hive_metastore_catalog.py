"""The Thrift catalog's parsing of what it is given: metastore URIs, table names and the schema
Spark keeps in a table's parameters (its talking to a real metastore is in tests/tables)."""

from __future__ import annotations

import pytest

from airflow_commit_provider.core.hive_metastore_catalog import (
    HiveMetastoreCatalog,
    metastore_addresses,
    simple_type,
    split_table_name,
)


def test_metastore_uris_are_thrift_host_port_lists() -> None:
    assert metastore_addresses("thrift://a:9083, thrift://b.example:1") == [("a", 9083), ("b.example", 1)]
    for bad in ("http://a:9083", "thrift://a", "thrift://:9083", "thrift://a:port"):
        with pytest.raises(ValueError, match=rf"^metastore uri '{bad}' is not thrift://host:port$"):
            metastore_addresses(bad)


def test_table_names_default_to_the_default_database() -> None:
    assert split_table_name("events") == ("default", "events")
    assert split_table_name("`Db`.`Events`") == ("db", "events")
    with pytest.raises(ValueError, match=r"^table name 'a.b.c' is not \[database.\]table$"):
        split_table_name("a.b.c")


@pytest.mark.parametrize(
    ("json_type", "expected"),
    [
        ("integer", "int"),
        ("long", "bigint"),
        ("short", "smallint"),
        ("byte", "tinyint"),
        ("decimal(10,2)", "decimal(10,2)"),
        ("timestamp_ntz", "timestamp_ntz"),
        ({"type": "array", "elementType": "long", "containsNull": True}, "array<bigint>"),
        (
            {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True},
            "map<string,int>",
        ),
        (
            {
                "type": "struct",
                "fields": [
                    {"name": "x", "type": "double", "nullable": True, "metadata": {}},
                    {"name": "n", "type": "short", "nullable": True, "metadata": {}},
                ],
            },
            "struct<x:double,n:smallint>",
        ),
    ],
)
def test_spark_schema_types_are_spelled_as_simple_strings(json_type: object, expected: str) -> None:
    """As ``DataType.simpleString``, which the DataFrame side of the checks uses."""
    assert simple_type(json_type) == expected


def test_simple_strings_agree_with_pyspark() -> None:
    """Every type in a schema that Spark would keep in the metastore, spelled as PySpark spells it."""
    from pyspark.sql import types as t

    nested = t.ArrayType(
        t.MapType(t.StringType(), t.StructType().add("x", t.IntegerType()).add("y", t.DateType()))
    )
    schema = t.StructType(
        [
            t.StructField(f"c{index}", data_type)
            for index, data_type in enumerate(
                [
                    t.ByteType(),
                    t.ShortType(),
                    t.IntegerType(),
                    t.LongType(),
                    t.FloatType(),
                    t.DoubleType(),
                    t.DecimalType(38, 9),
                    t.StringType(),
                    t.BinaryType(),
                    t.BooleanType(),
                    t.DateType(),
                    t.TimestampType(),
                    t.TimestampNTZType(),
                    nested,
                ]
            )
        ]
    )
    for field in schema.jsonValue()["fields"]:
        assert simple_type(field["type"]) == schema[field["name"]].dataType.simpleString()


def test_a_batch_holds_at_least_one_partition() -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be at least 1, not 0$"):
        HiveMetastoreCatalog("thrift://a:9083", batch_size=0)
