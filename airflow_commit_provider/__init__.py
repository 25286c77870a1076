"""Airflow provider implementing Hadoop/Spark output commit protocols in Python."""

__version__ = "0.1.0"
