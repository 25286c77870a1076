#!/usr/bin/env bash
# Builds airflow_commit_provider/spark/jvm/airflow-commit-spark.jar (not in git; shipped in the wheel)
# from the Java sources beside it, against the Spark jars of the venv's PySpark (`javac --release 17`,
# the JDK's compiler, which scripts/bootstrap.sh installs). Idempotent: nothing to do when the jar is
# newer than every source. Called by scripts/bootstrap.sh and before the release check builds the wheel.
#
#   scripts/build_jvm.sh            (VENV_PYTHON=... to use another venv's PySpark)
set -euo pipefail

cd "$(dirname "$0")/.."

PY=${VENV_PYTHON:-.venv/bin/python}
SOURCES=airflow_commit_provider/spark/jvm
JAR=$SOURCES/airflow-commit-spark.jar

if [ -f "$JAR" ] && [ -z "$(find "$SOURCES" -name '*.java' -newer "$JAR")" ]; then
    exit 0
fi
spark_jars=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
"${JAVA_HOME:+$JAVA_HOME/bin/}javac" --release 17 -Xlint:-options -cp "$spark_jars/*" -d "$classes" "$SOURCES"/*.java
"${JAVA_HOME:+$JAVA_HOME/bin/}jar" --create --file "$JAR" -C "$classes" .
echo "build_jvm: built $JAR"
