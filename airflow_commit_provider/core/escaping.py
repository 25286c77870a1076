"""Hive-style partition directories, escaped exactly as Spark escapes them.

A port of Spark's ``ExternalCatalogUtils.escapePathName`` / ``getPartitionPathString``
(sql/catalyst .../catalog/ExternalCatalogUtils.scala, itself copied from Hive's FileUtils):
ASCII control characters 0x01-0x1F, ``"#%'*/:=?\\`` DEL ``{[]^`` become ``%XX`` (upper-case hex);
everything else, spaces and non-ASCII included, is kept (Spark also escapes `` <>|`` on Windows
only). A null or empty value is ``__HIVE_DEFAULT_PARTITION__``. The test suite checks this port
against the JVM implementation through py4j.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_ESCAPED = frozenset([chr(code) for code in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


def escape_path_name(value: str) -> str:
    """Spark's ``ExternalCatalogUtils.escapePathName``."""
    if not value or not any(char in _ESCAPED for char in value):
        return value
    return "".join(f"%{ord(char):02X}" if char in _ESCAPED else char for char in value)


def unescape_path_name(value: str) -> str:
    """Spark's ``ExternalCatalogUtils.unescapePathName`` (a ``%`` not followed by hex is kept)."""
    out = []
    index = 0
    while index < len(value):
        char = value[index]
        if char == "%" and index + 2 < len(value):
            digits = value[index + 1 : index + 3]
            if _HEX2.fullmatch(digits):
                out.append(chr(int(digits, 16)))
                index += 3
                continue
        out.append(char)
        index += 1
    return "".join(out)


def partition_value_string(value: str | None) -> str:
    """Spark's ``getPartitionValueString``: escaped, or the Hive default name for null/empty."""
    return DEFAULT_PARTITION_NAME if value is None or value == "" else escape_path_name(value)


def partition_path(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """``col1=v1/col2=v2`` for values already cast to strings the way Spark casts them."""
    return "/".join(
        f"{escape_path_name(column)}={partition_value_string(value)}"
        for column, value in zip(columns, values, strict=True)
    )
