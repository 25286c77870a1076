"""The Hadoop client configuration a process was given (``HADOOP_CONF_DIR``), read as Hadoop reads it.

``hdfs:///t`` means "on the default filesystem", which is ``fs.defaultFS`` in ``core-site.xml``; the
NameNode's WebHDFS address is ``dfs.namenode.http-address`` in ``hdfs-site.xml``. Reading the same
files Spark and the ``hdfs`` CLI read keeps one owner for those facts: the cluster's client
configuration, not a copy in ours.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from functools import lru_cache

#: The variable naming the folder of the cluster's client configuration (Hadoop's and Spark's).
HADOOP_CONF_DIR = "HADOOP_CONF_DIR"


class HadoopConfError(ValueError):
    """A Hadoop configuration file cannot be read; the message names it."""


def hadoop_conf_value(
    file_name: str, key: str, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """(value of `key` in ``$HADOOP_CONF_DIR/<file_name>`` or None, where it was looked for): the
    second part is what an error names when the value is missing."""
    environ = os.environ if environ is None else environ
    conf_dir = environ.get(HADOOP_CONF_DIR, "")
    if not conf_dir:
        return None, f"{HADOOP_CONF_DIR} (not set)"
    path = os.path.join(conf_dir, file_name)
    return _properties(path, _modified(path)).get(key), path


def _modified(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return -1.0


@lru_cache(maxsize=8)
def _properties(path: str, modified: float) -> dict[str, str]:
    """The ``<property>`` names and values of one file, read once per version of it."""
    if modified < 0:
        return {}
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise HadoopConfError(f"{path}: not a readable Hadoop configuration file ({error})") from None
    properties = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name and value is not None:
            properties[name.strip()] = value.strip()
    return properties
