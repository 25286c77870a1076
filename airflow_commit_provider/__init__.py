"""Airflow provider implementing Hadoop/Spark output commit protocols in Python."""

#: The release, in one place: pyproject.toml reads it (``dynamic = ["version"]``), and so do the
#: provider info and the zip shipped to Spark, whose executors have no package metadata to ask.
__version__ = "0.1.0"
