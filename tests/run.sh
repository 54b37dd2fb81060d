#!/usr/bin/env bash
# Installs what the tests need on a fresh machine and runs every suite.
#   bash tests/run.sh            everything
#   FUZZ_SECONDS=0 bash tests/run.sh   skip the fuzz smoke run
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
FUZZ_SECONDS=${FUZZ_SECONDS:-10}

section() { printf '\n== %s (at %dm%02ds)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

section "system packages"
missing=()
command -v ngircd >/dev/null 2>&1 || [ -x /usr/sbin/ngircd ] || missing+=(ngircd)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
{ command -v ssh && command -v ssh-keygen; } >/dev/null 2>&1 || missing+=(openssh-client)
command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "ngircd: $(command -v ngircd || echo /usr/sbin/ngircd)"
echo "sshd: /usr/sbin/sshd ($(ssh -V 2>&1))"

section "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

section "Rust tests (unit, property, two-party harness, real ngircd, real sshd, real child processes)"
cargo test --workspace --quiet 2>&1 | tee target/test-output.txt
# cargo prints a result line per test binary; sum them up into one closing line.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "rust: %d passed, %d failed\n", p, f }' target/test-output.txt

section "aarch64 (Android, ARM hosts): the core without the x86 SIMD paths, under qemu-user"
rustup target add aarch64-unknown-linux-gnu >/dev/null
cargo clippy -p deskwire --target aarch64-unknown-linux-gnu --quiet -- -D warnings
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
cargo test -p deskwire --target aarch64-unknown-linux-gnu --quiet --lib \
  --test oa1_vectors --test oa1_pair --test oa1_limits --test irc_vectors

section "MCP: rexd --mcp driven by the official MCP Python SDK"
cargo build --quiet -p rexd --bin rexd
venv=target/mcp-venv
if ! "$venv/bin/python" -c 'import mcp, pytest' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'mcp==2.3.0' pytest
fi
REXD="$PWD/target/debug/rexd" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/mcp

section "desk demo (README main command)"
out=$(cargo run --quiet --release --bin desk -- 'printf "hello from %s\n" desk')
echo "$out"
[ "$out" = "hello from desk" ]

if [ "$FUZZ_SECONDS" -gt 0 ]; then
  section "fuzz smoke run (${FUZZ_SECONDS}s per target)"
  if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet
  fi
  (
    cd core/fuzz
    for target in $(cargo fuzz list); do
      echo "-- $target"
      cargo fuzz run -s none "$target" -- -max_total_time="$FUZZ_SECONDS" 2>&1 | tail -n 2
    done
  )
fi

section "done"
