#!/usr/bin/env bash
# `make test` (and so CI's .ci/run): the main suite and the compatibility run.
#
#   scripts/test.sh [pytest arguments]
#
# With pytest arguments (`make test PYTEST_ARGS='-k staging -x'`): one pytest run with them, and no
# compatibility run.
#
# Without: two lanes at once. The run mostly waits - JVM start-ups, spark-submit applications,
# Airflow's services, PostgreSQL - and used less than one of the 2 cores on average when run in series:
#
#   main lane: pytest on every test but SIDE_LANE's, its output live;
#   side lane: pytest on SIDE_LANE - tests that spend their time in processes of their own (the
#              deployment's Airflow services, the standalone cluster's applications, the benchmarks'
#              Spark runs, the shared metastore's applications, the dev tools' servers) - then scripts/compat.sh (its own venv, PySpark and embedded S3). Its output
#              goes to a log, printed when the main lane has ended.
#
# The lanes share nothing they could collide on: every server (SeaweedFS, Spark Connect, the
# standalone cluster, PostgreSQL, Airflow's api-server) binds a free loopback port, every test works
# in its own temporary directories, and the side lane runs without pytest's cache. Interrupted
# (SIGINT/SIGTERM), the side lane gets SIGINT, so its fixtures stop what they started.
#
# Exit status: 0 only if every pytest run and the compatibility run passed. pytest's exit 5
# (collected no tests) is a failure here, not a pass.
set -uo pipefail

cd "$(dirname "$0")/.."

VENV_PYTHON=${VENV_PYTHON:-.venv/bin/python}
SIDE_LANE=(tests/deployment tests/cluster tests/bench tests/tables tests/devtools)

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
    local rc=0 compat_rc=0
    trap 'exit 130' INT # interrupted: no compatibility run after the pytest run
    run_pytest -p no:cacheprovider "${SIDE_LANE[@]}" || rc=$?
    bash scripts/compat.sh || compat_rc=$?
    if [ "$compat_rc" -ne 0 ]; then
        echo "make test: ERROR: the compatibility run failed (exit $compat_rc)" >&2
        [ "$rc" -ne 0 ] || rc=$compat_rc
    fi
    echo "make test: the side lane took $SECONDS s"
    return "$rc"
}

side_log=$(mktemp "${TMPDIR:-/tmp}/make-test-side-lane.XXXXXX")
echo "make test: the side lane (${SIDE_LANE[*]}, then the compatibility run) runs meanwhile; log: $side_log"
# A process group of its own (job control), so an interrupt reaches all of it and nothing else.
set -m
side_lane </dev/null >"$side_log" 2>&1 &
side_pid=$!
set +m
side_rc=0
finish_side_lane() {
    wait "$side_pid" || side_rc=$?
    echo "================ make test: the side lane (exit $side_rc), from $side_log ================"
    cat "$side_log"
    rm -f "$side_log"
}
trap 'kill -INT -- "-$side_pid" 2>/dev/null; finish_side_lane; exit 130' INT TERM

rc=0
ignored=()
for path in "${SIDE_LANE[@]}"; do ignored+=("--ignore=$path"); done
run_pytest "${ignored[@]}" || rc=$?
echo "make test: the main lane took $SECONDS s"

trap - INT TERM
finish_side_lane
if [ "$side_rc" -ne 0 ]; then
    echo "make test: ERROR: the side lane failed (exit $side_rc)" >&2
    [ "$rc" -ne 0 ] || rc=$side_rc
fi
exit "$rc"
