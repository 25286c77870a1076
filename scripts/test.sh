#!/usr/bin/env bash
# `make test` (and so CI's .ci/run): the main suite and the compatibility run.
#
#   scripts/test.sh [pytest arguments]
#
# With pytest arguments (`make test PYTEST_ARGS='-k staging -x'`): one pytest run with them, and no
# compatibility run.
#
# Without: three lanes at once. The run mostly waits - JVM start-ups, spark-submit applications,
# Airflow's services, PostgreSQL - and used about one of the 2 cores on average with two lanes:
#
#   main lane:   pytest on every test but SIDE_LANE's, its output live;
#   side lane:   pytest on SIDE_LANE - tests that spend their time in processes of their own (the
#                deployment's Airflow services, the standalone cluster's applications, the YARN + HDFS
#                cluster's, the benchmarks' Spark runs, spark-submit tries under Airflow, the
#                documentation site's build);
#   compat lane: scripts/compat.sh (its own venv, PySpark and embedded S3), then pytest on
#                AFTER_COMPAT (the Airflow tests of tables, the shared metastore's applications, the
#                dev tools' servers, cleanup),
#                which keeps the three lanes about as long as each other.
# The side and compat lanes' output goes to logs, printed when the main lane has ended.
#
# The lanes share nothing they could collide on: every server (SeaweedFS, Spark Connect, the
# standalone cluster, PostgreSQL, the Hive metastore, Airflow's api-server) binds a free loopback
# port, every test works in its own temporary directories, and only the main lane uses pytest's
# cache. Interrupted (SIGINT/SIGTERM), the background lanes get SIGINT, so their fixtures stop what
# they started.
#
# Exit status: 0 only if every pytest run and the compatibility run passed. pytest's exit 5
# (collected no tests) is a failure here, not a pass.
set -uo pipefail

cd "$(dirname "$0")/.."

VENV_PYTHON=${VENV_PYTHON:-.venv/bin/python}
SIDE_LANE=(tests/deployment tests/cluster tests/hadoop tests/bench tests/airflow tests/docs)
# The Airflow tests that run Spark applications against tables go after the compatibility run,
# FIRST (tests/airflow/conftest.py must choose AIRFLOW_HOME before tests/cleanup's conftest would),
# beside tests/tables: test_daily_table_mode shares the session's Thrift metastore service with it.
AIRFLOW_AFTER_COMPAT=(
    tests/airflow/test_daily_table_mode.py
    tests/airflow/test_committed_spark_submit_tables.py
    tests/airflow/test_daily_ingest_dag.py
)
AFTER_COMPAT=("${AIRFLOW_AFTER_COMPAT[@]}" tests/tables tests/devtools tests/cleanup)

run_pytest() {
    local rc=0
    "$VENV_PYTHON" -m pytest "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "make test: ERROR: pytest collected no tests (exit 5)" >&2
        rc=1
    fi
    return "$rc"
}

if [ "$#" -gt 0 ]; then
    run_pytest "$@"
    exit
fi

side_lane() {
    trap 'exit 130' INT
    run_pytest -p no:cacheprovider "${SIDE_LANE[@]}" "${AIRFLOW_AFTER_COMPAT[@]/#/--ignore=}"
}

compat_lane() {
    local rc=0
    trap 'exit 130' INT
    bash scripts/compat.sh || rc=$?
    run_pytest -p no:cacheprovider "${AFTER_COMPAT[@]}" || rc=$?
    return "$rc"
}

lane_names=()
lane_pids=()
lane_logs=()
start_lane() { # name function: run it in the background, in a process group of its own (job control)
    local log
    log=$(mktemp "${TMPDIR:-/tmp}/make-test-$1-lane.XXXXXX")
    echo "make test: the $1 lane runs meanwhile; log: $log"
    set -m
    (
        local rc=0
        "$2" </dev/null || rc=$?
        echo "make test: the $1 lane took $SECONDS s"
        exit "$rc"
    ) >"$log" 2>&1 &
    lane_pids+=($!)
    set +m
    lane_names+=("$1")
    lane_logs+=("$log")
}

rc=0
lane_rcs=()
finish_lanes() {
    local i lane_rc
    for i in "${!lane_pids[@]}"; do
        lane_rc=0
        wait "${lane_pids[$i]}" || lane_rc=$?
        lane_rcs[$i]=$lane_rc
        echo "================ make test: the ${lane_names[$i]} lane (exit $lane_rc), from ${lane_logs[$i]} ================"
        cat "${lane_logs[$i]}"
        if [ "$lane_rc" -ne 0 ]; then
            echo "make test: ERROR: the ${lane_names[$i]} lane failed (exit $lane_rc)" >&2
            [ "$rc" -ne 0 ] || rc=$lane_rc
        fi
    done
}
# The last lines of the output, which is all a CI page may keep: each lane's exit status, pytest's
# result lines and every failed or erroring test, whichever lane it ran in.
summarise_lanes() {
    local i
    echo "================ make test: summary ================"
    for i in "${!lane_names[@]}"; do
        echo "the ${lane_names[$i]} lane: exit ${lane_rcs[$i]:-?}"
        grep -E '^(FAILED|ERROR) |^=+ .*(passed|failed|error|no tests ran).* =+$|^make test: (the|ERROR)' \
            "${lane_logs[$i]}" | tail -40 || true
        rm -f "${lane_logs[$i]}"
    done
}
interrupted() {
    local pid
    for pid in "${lane_pids[@]}"; do kill -INT -- "-$pid" 2>/dev/null; done
    finish_lanes
    exit 130
}

start_lane side side_lane
start_lane compat compat_lane
trap interrupted INT TERM

ignored=()
for path in "${SIDE_LANE[@]}" "${AFTER_COMPAT[@]}"; do ignored+=("--ignore=$path"); done
main_log=$(mktemp "${TMPDIR:-/tmp}/make-test-main-lane.XXXXXX")
main_rc=0
run_pytest "${ignored[@]}" 2>&1 | tee "$main_log" || main_rc=${PIPESTATUS[0]}
echo "make test: the main lane took $SECONDS s" | tee -a "$main_log"
[ "$main_rc" -eq 0 ] || rc=$main_rc

trap - INT TERM
finish_lanes
lane_names=(main "${lane_names[@]}")
lane_logs=("$main_log" "${lane_logs[@]}")
lane_rcs=("$main_rc" "${lane_rcs[@]}")
summarise_lanes
exit "$rc"
