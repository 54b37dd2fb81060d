#!/usr/bin/env bash
# The Python suite (tests/run.sh's "Python" section), from a fresh virtual environment:
#   one `pip install ./bindings/python` (pip fetches maturin, cargo builds the abi3 extension),
#   the stubs checked by mypy.stubtest against the compiled module, pytest (every conformance
#   vector file, bad input, asyncio end to end against ngircd / rexd --irc / rexd --stdio /
#   a loopback sshd / examples/mobile_desktop over a WebSocket, the provider fixtures against the official SDKs' models), the examples
#   (the Rust sidecar host driving examples/sidecar.py, the agent in memory and over IRC), and
#   the benchmark code once, untimed.
# Downloads (pip) and the extension's cargo build are cached under DESKWIRE_CACHE.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
cache="${DESKWIRE_CACHE:-$HOME/.cache/deskwire}"
export PIP_CACHE_DIR="$cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1

# `--bin` picks targets across every package named, so each binary is named.
cargo build --quiet -p rexd -p deskwire-sidecar-host -p mobile_desktop --bin rexd --bin sidecar-host --bin mobile_desktop
bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
export DESKWIRE_REXD="$bin/rexd" PEERS_REXD="$bin/rexd" DESKWIRE_MOBILE_DESKTOP="$bin/mobile_desktop"

venv="$repo/target/python-venv"
rm -rf "$venv"
python3 -m venv "$venv"
py="$venv/bin/python"
CARGO_TARGET_DIR="$cache/python-target" "$venv/bin/pip" install --quiet ./bindings/python
"$venv/bin/pip" install --quiet -r bindings/python/requirements-test.txt
# Imported from the venv, not from the source tree.
(cd / && "$py" -c 'import deskwire, sys; assert deskwire.__file__.startswith(sys.prefix), deskwire.__file__; print("deskwire", deskwire.__version__, "from", deskwire.__file__)')

echo "-- mypy.stubtest"
stubdir=$(mktemp -d)
(cd "$stubdir" && "$py" -m mypy.stubtest deskwire)
rm -rf "$stubdir"

echo "-- pytest"
(cd bindings/python && DESKWIRE_INSTALLED=1 "$py" -m pytest -q -p no:cacheprovider tests)

echo "-- the abi3 wheel, built once and installed with no Rust on PATH into every other CPython >= 3.9 here"
wheels=$(mktemp -d)
CARGO_TARGET_DIR="$cache/python-target" "$venv/bin/pip" wheel --quiet --no-deps ./bindings/python -w "$wheels"
wheel=$(echo "$wheels"/deskwire-*-cp39-abi3-*.whl)
test -f "$wheel" || { echo "no cp39-abi3 wheel in $wheels: $(ls "$wheels")" >&2; exit 1; }
others=0
main_version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
for other in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3; do
  [ -x "$other" ] || continue
  # 3.9 (the oldest the wheel claims) and later, other than the venv's own.
  "$other" -c 'import sys; v = sys.version_info[:2]; sys.exit(not ((3, 9) <= v and "%d.%d" % v != sys.argv[1]))' \
    "$main_version" || continue
  other_venv="$wheels/venv-$("$other" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  "$other" -m venv "$other_venv"
  env PATH=/usr/bin:/bin "$other_venv/bin/pip" install --quiet --no-index "$wheel"
  (cd / && env PATH=/usr/bin:/bin "$other_venv/bin/python" "$repo/bindings/python/tests/wheel_smoke.py")
  others=$((others + 1))
done
echo "$(basename "$wheel"): installed and run on $others other CPython versions"
rm -rf "$wheels"

echo "-- examples/sidecar_host driving examples/sidecar.py"
"$bin/sidecar-host" "$py" examples/sidecar.py

echo "-- examples/python_agent.py (in memory, then rexd --irc through ngircd)"
"$py" examples/python_agent.py >/dev/null
(
  source tests/peers.sh
  peers_start_ngircd
  peers_start_rexd_irc '#desk' deskbot --allow-from desk
  "$py" examples/python_agent.py --irc "$PEERS_IRC_ADDR" | tail -n 1
)

echo "-- benchmarks, run once untimed"
(cd bindings/python && "$py" -m pytest -q -p no:cacheprovider benches --benchmark-disable)
