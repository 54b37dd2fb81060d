#!/usr/bin/env bash
# Load: N desks against one `rexd --irc` through a private ngircd, in one run (a measurement,
# not a CI test: it prints a table and asserts nothing about speed). Run it alone on the machine:
#     flock /tmp/deskwire-build.lock bash tests/load/run.sh [--sizes 1,10,100,500] [--seconds 22]
# The load tool is tests/integration/src/bin/load.rs; the results and what they mean are in
# docs/benchmarks.md ("Load: N desks against one rexd") and docs/scaling.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

sizes=1,10,100,500
seconds=22
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) sizes=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        *) echo "usage: $0 [--sizes 1,10,100,500] [--seconds 22]" >&2; exit 2 ;;
    esac
done

# Both optimized: a debug rexd measures the debug build, and debug desks take the CPU rexd needs.
cargo build --release -q -p rexd --bin rexd -p deskwire-integration --bin load
load=target/release/load
rexd=target/release/rexd

# 500 desks are 500 sockets here and 500 in ngircd (one process each side), plus rexd's.
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 2048 ]; then
    ulimit -n 2048
fi
echo "ngircd: $(/usr/sbin/ngircd --version 2>/dev/null | head -1 | cut -d- -f1)"
echo "rexd: $rexd (release); open files: $(ulimit -n); $(nproc) cores"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)

run() { "$load" --rexd "$rexd" --seconds "$seconds" --sizes "$sizes" --warmup 10 --ready-secs 30 "$@"; }
# Requests keep their default 30 s timeout: the window (after 10 s of asking, 22 s long) sees
# the first of them time out. N = 1 is the same in every shape: it runs in the first and last
# groups. --sizes sets the groups that name none.
# ngircd as shipped, rexd and the desks pacing themselves to it (rexd learns it from the 004).
run --header --shape shared --limits default
run --shape per-channel --limits default --sizes 10,100,500
run --shape multi --limits default --sizes 10,100,500
# The operator exempted the remote (MaxPenaltyTime = 0, rexd --pacing-interval-ms 0).
run --shape shared --limits remote-exempt --sizes 100,500
run --shape per-channel --limits remote-exempt --sizes 100,500
run --shape multi --limits remote-exempt --sizes 100
# And the desks' one connection too: what rexd itself can do.
run --shape multi --limits all-exempt

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - start)) s"
