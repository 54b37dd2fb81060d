#!/usr/bin/env bash
# The chaos run (issue 38, part 3): a linked network of three ngircd servers, a rexd --irc on each,
# Python and Rust desks on the other servers, and faults at times drawn from the seed.
#   bash tests/chaos/run.sh --seconds 100 --seed 7     (CI: about 2 minutes in all)
#   bash tests/chaos/run.sh --seconds 3600 --seed 7    (by hand)
# Without --seed one is drawn and printed. The last line reads
#   chaos: R requests, A answered, F failed, W wrong, D duplicate, H hung
# and the run exits 1 when W, D or H is not 0 (or a process's peak RSS passes its bound), printing
# the command that repeats it; its logs (each request's outcome in requests.jsonl, the servers' and
# rexds' logs) are then kept, as they are with CHAOS_KEEP=1. Every process it starts is stopped on
# exit, Ctrl-C included.
# Uses target/debug/rexd and target/debug/desk (built when missing; PEERS_REXD and CHAOS_DESK name
# others) and a Python with deskwire installed: CHAOS_PYTHON, else bindings/python/run_tests.sh's
# venv, target/python-venv.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=100
seed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: bash tests/chaos/run.sh --seconds N [--seed S]" >&2; exit 2 ;;
  esac
done
# Checked before any server starts.
[[ "$seconds" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "chaos: --seconds takes a number of seconds, not '$seconds'" >&2; exit 2; }
[ -z "$seed" ] || [[ "$seed" =~ ^[0-9]+$ ]] || { echo "chaos: --seed takes a whole number, not '$seed'" >&2; exit 2; }
[ -n "$seed" ] || seed=$(python3 -c 'import random; print(random.randrange(1 << 31))')
echo "chaos: seed $seed, $seconds s"

python=${CHAOS_PYTHON:-target/python-venv/bin/python}
"$python" -c 'import deskwire' 2>/dev/null || {
  echo "chaos: $python has no deskwire: run bash bindings/python/run_tests.sh first, or set CHAOS_PYTHON" >&2
  exit 2
}
export PEERS_REXD=${PEERS_REXD:-$PWD/target/debug/rexd}
export CHAOS_DESK=${CHAOS_DESK:-$PWD/target/debug/desk}
if [ ! -x "$PEERS_REXD" ] || [ ! -x "$CHAOS_DESK" ]; then
  bash tests/build.sh -p rexd -p deskwire-desk --bin rexd --bin desk
fi

source tests/peers.sh
workdir=$(mktemp -d "${TMPDIR:-/tmp}/deskwire-chaos.XXXXXX")
keep_logs() {
  local status=$?
  if { [ "$status" != 0 ] || [ "${CHAOS_KEEP:-0}" = 1 ]; } && [ -n "$PEERS_DIR" ]; then
    cp -r "$PEERS_DIR"/net-* "$workdir"/ 2>/dev/null || true
    echo "chaos: logs in $workdir" >&2
  else
    rm -rf "$workdir"
  fi
  peers_stop_all
}
peers__init
trap keep_logs EXIT
peers_start_ngircd_network 3
"$python" tests/chaos/chaos.py --seconds "$seconds" --seed "$seed" --workdir "$workdir"
