#!/usr/bin/env bash
# The Python suite (tests/run.sh's "Python" section), from a fresh virtual environment:
#   one `pip install ./bindings/python` (pip fetches maturin, cargo builds the abi3 extension),
#   the stubs checked by mypy.stubtest against the compiled module, pytest (every conformance
#   vector file, bad input, asyncio end to end against ngircd / rexd --irc / rexd --stdio /
#   a loopback sshd / examples/mobile_desktop and aio.GatewayServer over WebSockets, the
#   provider fixtures against the official SDKs' models, every ```python block of README.md
#   against ngircd / rexd --irc / rexd on PATH and a recorded Anthropic answer), the examples
#   (the Rust sidecar host driving examples/sidecar.py, the agent in memory and over IRC), and
#   the benchmark code once, untimed.
# Downloads (pip) and the extension's cargo build are cached under DESKWIRE_CACHE.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
cache="${DESKWIRE_CACHE:-$HOME/.cache/deskwire}"
export PIP_CACHE_DIR="$cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1

# `--bin` picks targets across every package named, so each binary is named.
bash tests/build.sh -p rexd -p deskwire-sidecar-host -p mobile_desktop -p deskwire-integration \
  --bin rexd --bin sidecar-host --bin mobile_desktop --bin services-irc
bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
export DESKWIRE_REXD="$bin/rexd" PEERS_REXD="$bin/rexd" DESKWIRE_MOBILE_DESKTOP="$bin/mobile_desktop"
export DESKWIRE_SERVICES_IRC="$bin/services-irc"

venv="$repo/target/python-venv"
rm -rf "$venv"
python3 -m venv "$venv"
py="$venv/bin/python"
CARGO_TARGET_DIR="$cache/python-target" "$venv/bin/pip" install --quiet ./bindings/python
"$venv/bin/pip" install --quiet -r bindings/python/requirements-test.txt
# Imported from the venv, not from the source tree.
(cd / && "$py" -c 'import deskwire, sys; assert deskwire.__file__.startswith(sys.prefix), deskwire.__file__; print("deskwire", deskwire.__version__, "from", deskwire.__file__)')

echo "-- mypy.stubtest, and mypy --strict over the installed package and tests/typing_check.py (what a typed user's checker reads)"
stubdir=$(mktemp -d)
(cd "$stubdir" && "$py" -m mypy.stubtest deskwire && "$py" -m mypy --strict --no-incremental -p deskwire \
  && "$py" -m mypy --strict --no-incremental "$repo/bindings/python/tests/typing_check.py")
rm -rf "$stubdir"

echo "-- pytest"
(cd bindings/python && DESKWIRE_INSTALLED=1 "$py" -m pytest -q -p no:cacheprovider tests)

echo "-- the release wheel: abi3, manylinux (maturin's auditwheel check), installed with no Rust on PATH into every other CPython >= 3.9 here"
# `pip install .` tags what it builds linux_x86_64, fit only for the machine that built it.
# `maturin build` checks every versioned glibc symbol the extension links against the PEP 600
# policies and tags the wheel with the oldest glibc it runs on, as PyPI requires. With
# `--auditwheel check` it fails the build if some library would have to be bundled instead of
# repairing the wheel; one that fits no policy comes out plain `linux`, refused just below.
wheels=$(mktemp -d)
CARGO_TARGET_DIR="$cache/python-target" "$venv/bin/maturin" build --quiet --release \
  --auditwheel check -m bindings/python/Cargo.toml -o "$wheels"
wheel=$(echo "$wheels"/deskwire-*-cp39-abi3-manylinux_*_x86_64.whl)
test -f "$wheel" || { echo "no cp39-abi3 manylinux wheel in $wheels: $(ls "$wheels")" >&2; exit 1; }
# The symbols behind the tag, for the closing line: the newest glibc version the wheel needs.
"$py" - "$wheel" "$wheels/ext.so" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    (name,) = [n for n in wheel.namelist() if n.startswith("deskwire/_deskwire") and n.endswith(".so")]
    open(sys.argv[2], "wb").write(wheel.read(name))
PY
glibc=$(objdump -T "$wheels/ext.so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
echo "$(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"
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
echo "$(basename "$wheel") (needs $glibc at most): installed and run on $others other CPython versions"
rm -rf "$wheels"

echo "-- examples/sidecar_host driving examples/sidecar.py"
"$bin/sidecar-host" "$py" examples/sidecar.py

echo "-- examples/python_agent.py (in memory, then rexd --irc through ngircd)"
"$py" examples/python_agent.py >/dev/null
(
  source tests/peers.sh
  peers_start_ngircd
  peers_start_rexd_irc '#desk' rexd --allow-from desk
  "$py" examples/python_agent.py --irc "$PEERS_IRC_ADDR" | tail -n 1
)

echo "-- benchmarks, run once untimed"
(cd bindings/python && "$py" -m pytest -q -p no:cacheprovider benches --benchmark-disable)
