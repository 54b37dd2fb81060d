#!/usr/bin/env bash
# Installs what the tests need on a fresh machine and runs every suite.
#   bash tests/run.sh            everything
#   FUZZ_SECONDS=0 bash tests/run.sh   skip the fuzz smoke run
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# Every run here builds from scratch, so incremental state is only disk (about 3 GB), and debug
# info is most of the rest: even line tables were 41 MB of a 70 MB test binary, and stop 40's
# run filled a small machine's disk in the aarch64 build with them. A panic still names its file
# and line, and a backtrace its functions. A build that fills the disk fails the run (the
# smallest machines here have had under 20 GB free).
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=false
# The same for the release builds here (the Python package's): the release profile keeps debug
# info for profiling, which a test run never reads.
export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
# A smoke run: 5 s a target finds what breaks at once (13 targets, a minute in all); longer
# runs are `cargo fuzz run` by hand. FUZZ_SECONDS=60 gives each target a minute.
FUZZ_SECONDS=${FUZZ_SECONDS:-5}
# The peers this script installs must be there: a test that would be ignored for want of one
# (the ssh tests without OpenSSH) fails the build instead.
export DESKWIRE_REQUIRE_PEERS=1

# Each header says how much disk is left: the disk is shared, and a run that fills it fails in
# whichever build happens to be writing (stop 30's run died in the desk demo's).
section() {
  printf '\n== %s (at %dm%02ds, %s free)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)) \
    "$(df -h --output=avail . | tail -1 | tr -d ' ')"
}

section "system packages"
missing=()
command -v ngircd >/dev/null 2>&1 || [ -x /usr/sbin/ngircd ] || missing+=(ngircd)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
{ command -v ssh && command -v ssh-keygen; } >/dev/null 2>&1 || missing+=(openssh-client)
command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
[ -f /usr/include/jansson.h ] || missing+=(libjansson-dev)
# examples/c_host's TLS.
[ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
{ command -v gcc && command -v g++; } >/dev/null 2>&1 || missing+=(gcc g++)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v clang >/dev/null 2>&1 || missing+=(clang libclang-rt-14-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
# tests/dist/run.sh rates the .deb's systemd units (systemd-analyze security --offline).
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# IRC over TLS with SASL and accounts: InspIRCd 3 with Atheme services (rexd's SASL tests).
[ -x /usr/sbin/inspircd ] || missing+=(inspircd)
[ -x /usr/bin/atheme-services ] || missing+=(atheme-services)
# rexd --listen's tests: curl for POST /rpc, openssl for the run's certificates and s_client.
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "ngircd: $(command -v ngircd || echo /usr/sbin/ngircd)"
echo "sshd: /usr/sbin/sshd ($(ssh -V 2>&1))"
echo "disk: $(df -h --output=avail . | tail -1 | tr -d " ") free"

# The release artifacts (cargo xtask dist --linux: static musl rexd and its .debs, the C
# tarballs, the manylinux2014 wheels, the Godot addon and the JAR, for Linux x86_64 and aarch64)
# and the Debian roots their install tests use are built in the background from here, at a lower
# priority (nice 10: a compiling suite takes the cores first): the suites below wait on servers,
# child processes, the JVM and Godot much of the time (42 CPU-minutes in a 36-minute run on 2
# cores), and this uses the core they leave. The build's target directory is kept outside the
# clone. The artifacts are installed and tested at the end. DESKWIRE_DIST=0 leaves them out.
cache=${DESKWIRE_CACHE:-$HOME/.cache/deskwire}
# Cargo never deletes what a changed source made stale, so a target directory kept between runs
# grows with every commit; past its limit it starts again from empty (a cold build, which a run
# must pass anyway).
cap_cache() { # DIR MAX_GIB
  local size
  [ -d "$1" ] || return 0
  size=$(du -s --block-size=1G "$1" | cut -f1)
  if [ "$size" -gt "$2" ]; then
    echo "cache: $1 is $size GiB, over its $2 GiB: removed"
    rm -rf "$1"
  fi
}
cap_cache "$cache/dist-target" 8
cap_cache "$cache/python-target" 2
dist_pid=
if [ "${DESKWIRE_DIST:-1}" = 1 ]; then
  section "release artifacts: cargo xtask dist --linux --profile dist-ci and the Debian roots, in the background (log: target/dist-build.log)"
  # Its own session, so that a failing run stops the whole build (kill -- -PID).
  mkdir -p target
  setsid nice -n 10 bash -c 'set -e; bash tests/dist/run.sh --roots
    CARGO_TARGET_DIR="$1" cargo xtask dist --linux --profile dist-ci' _ "$cache/dist-target" \
    </dev/null >target/dist-build.log 2>&1 &
  dist_pid=$!
fi
# The fuzz targets (an optimized build of the core with coverage instrumentation, 13 binaries)
# are built from here too, at the lowest priority: they take the cycles left once the release
# artifacts are built, while the last suites wait on Godot, Python and the servers. The smoke run
# itself waits for them at the end.
fuzz_pid=
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  section "fuzz targets: built in the background (log: target/fuzz-build.log)"
  mkdir -p target
  setsid nice -n 19 bash -c 'set -e
    cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
    (cd core/fuzz && cargo fuzz build -s none)
    # The C entry points share the dependencies built for core/fuzz.
    (cd ffi/fuzz && cargo fuzz build -s none --target-dir ../../core/fuzz/target c_api)' \
    </dev/null >target/fuzz-build.log 2>&1 &
  fuzz_pid=$!
fi
# A failing run stops both builds (each has its own session: kill -- -PID).
trap 'for pid in $dist_pid $fuzz_pid; do kill -- "-$pid" 2>/dev/null || true; done' EXIT
# Waits for one of them, whose PID is in the variable named VAR, and empties it (the trap then
# leaves that PID alone); if the build failed, prints the end of its log and stops the run.
wait_build() { # VAR LOG LINES WHAT_FAILED
  local -n build_pid=$1
  local status=0
  wait "$build_pid" || status=$?
  build_pid=
  if [ "$status" != 0 ]; then
    tail -n "$3" "$2"
    echo "$4 (the end of $2 is above)" >&2
    exit 1
  fi
}

section "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

section "Rust tests (unit, property, two-party harness, real ngircd, real sshd, real child processes)"
# One build of the workspace's test selection serves every suite below (tests/build.sh says why).
export DESKWIRE_WORKSPACE_BUILD=1
bash tests/build.sh
# The test binaries run three at a time, four tests each at once (tests/rust_tests.py says why):
# 2.3 minutes here with the doctests, where the binaries alone, one after another, took 4.5.
RUST_TEST_THREADS=4 python3 tests/rust_tests.py --jobs 3 2>&1 | tee target/test-output.txt
# cargo prints a result line per test binary; sum them up into one closing line.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "rust: %d passed, %d failed\n", p, f }' target/test-output.txt
# No later suite runs the test harnesses (about 60 MB each, a gigabyte or more in all), and the
# builds after this one need the room: remove them. cargo names them itself (nothing is rebuilt).
cargo test --workspace --no-run --quiet --message-format=json | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable"):
        os.remove(m["executable"])'

section "aarch64 (Android, ARM hosts): the core without the x86 SIMD paths, under qemu-user"
rustup target add aarch64-unknown-linux-gnu >/dev/null
cargo clippy -p deskwire --target aarch64-unknown-linux-gnu --quiet -- -D warnings
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
cargo test -p deskwire --target aarch64-unknown-linux-gnu --quiet --lib \
  --test oa1_vectors --test oa1_pair --test oa1_limits --test irc_vectors \
  --test oa1_connection --test oa1_auth --test oa1_compress

section "MCP: rexd --mcp driven by the official MCP Python SDK"
bash tests/build.sh -p rexd --bin rexd
venv=target/mcp-venv
if ! "$venv/bin/python" -c 'import mcp, pytest' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'mcp==2.3.0' pytest
fi
REXD="$PWD/target/debug/rexd" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/mcp

section "Kotlin: uniffi bindings on the JVM (JUnit through Maven against the cdylib; a real WebSocket to examples/mobile_desktop)"
bash tests/build.sh -p deskwire-uniffi -p deskwire-uniffi-bindgen -p mobile_desktop -p rexd \
  -p deskwire-integration
# The generated Kotlin is committed (readable in review, usable without Rust tooling) and must
# be exactly what uniffi-bindgen makes from the library: regenerate it, then fail on any drift.
rm -rf bindings/kotlin/src/generated/kotlin
target/debug/uniffi-bindgen generate --library target/debug/libdeskwire_uniffi.so \
  --language kotlin --out-dir bindings/kotlin/src/generated/kotlin --no-format >/dev/null
if [ -n "$(git status --porcelain -- bindings/kotlin/src/generated)" ]; then
  git status --short -- bindings/kotlin/src/generated
  echo "bindings/kotlin/src/generated is stale: commit the regenerated Kotlin" >&2
  exit 1
fi
# Maven's downloads are kept outside the clone between runs.
m2="${DESKWIRE_CACHE:-$HOME/.cache/deskwire}/m2"
rm -rf bindings/kotlin/target/surefire-reports
mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2" -f bindings/kotlin/pom.xml test
echo # Maven -q still ends with bare colour resets; keep the closing line on its own.
awk '/^Tests run:/ { gsub(",", ""); r += $3; f += $5 + $7; s += $9 }
     END { printf "kotlin: %d passed, %d failed, %d skipped\n", r - f - s, f, s }' \
  bindings/kotlin/target/surefire-reports/*.txt

section "C: include/deskwire.h; C tests (vectors, exchanges, misuse) plain, under valgrind, with ASan+UBSan; install + pkg-config; examples/c_host against rexd --irc on ngircd"
bash tests/c/run.sh
# Its two Cargo trees (plain, and ASan's) are 3 GB that no later suite reads.
rm -rf target/c/build target/c/asan

section "Godot: the GDExtension and the desk demo in a real Godot 4 (Debian sid's, in a cached mmdebstrap root) against ngircd and rexd --irc"
bash godot/run_tests.sh

section "Python: pip install ./bindings/python into a fresh venv; mypy.stubtest; pytest (every vector file, bad input, asyncio against ngircd, rexd --irc, rexd --stdio, a loopback sshd, examples/mobile_desktop and aio.GatewayServer over WebSockets, the provider fixtures against the official SDKs' models); the sidecar host and the agent example"
bash bindings/python/run_tests.sh

section "desk demo (README main command)"
# The README's `cargo run --bin desk -- COMMAND`, run from the workspace build: `cargo run` would
# resolve features for the desk package alone and build rexd's dependencies again (tests/build.sh).
grep -q "^cargo run --bin desk -- " README.md
out=$(target/debug/desk 'printf "hello from %s\n" desk')
echo "$out"
[ "$out" = "hello from desk" ]

section "chaos run: 100 s of requests from Python and Rust desks to three rexd --irc across three linked ngircd, with servers killed, links split, rexd stopped and killed, a stalling/cutting/trickling proxy and a slow reader (tests/chaos/run.sh)"
# The Python suite's venv holds the wheel; the desk and rexd are the workspace build's. The seed
# is fixed so that CI's table is the one docs/oa1.md shows; CHAOS_SEED tries another.
CHAOS_PYTHON=target/python-venv/bin/python bash tests/chaos/run.sh --seconds 100 --seed "${CHAOS_SEED:-38}"

if [ -n "$fuzz_pid" ]; then
  section "fuzz smoke run (${FUZZ_SECONDS}s per target, two at a time)"
  wait_build fuzz_pid target/fuzz-build.log 60 "the fuzz targets did not build"
  # Each run's output goes to its own file and is printed in order once all have ended: the last
  # two lines of a passing run; of a failing one, the last 80 lines and any input the fuzzer kept
  # (base64), since CI keeps no files: enough to reproduce it.
  fuzz_out=$(mktemp -d)
  fuzz_smoke() { # DIR TARGET [cargo fuzz run options]
    local dir=$1 target=$2 log=$fuzz_out/$2
    shift 2
    if (cd "$dir" && cargo fuzz run -s none "$@" "$target" -- -max_total_time="$FUZZ_SECONDS") \
      >"$log.log" 2>&1; then
      tail -n 2 "$log.log" >"$log.out"
      return 0
    fi
    {
      echo "!! fuzz target $target failed; the end of its output:"
      tail -n 80 "$log.log"
      for input in "$dir/artifacts/$target"/*; do
        [ -f "$input" ] && echo "!! kept input $input: $(base64 -w0 "$input")"
      done
    } >"$log.out"
    touch "$log.failed"
  }
  runs=()
  for target in $(cd core/fuzz && cargo fuzz list); do
    runs+=("core/fuzz $target")
  done
  runs+=("ffi/fuzz c_api --target-dir ../../core/fuzz/target")
  # libFuzzer runs on one core: two at a time keep both busy.
  export -f fuzz_smoke
  export fuzz_out FUZZ_SECONDS
  printf '%s\n' "${runs[@]}" | xargs -P 2 -L 1 bash -c 'fuzz_smoke "$@"' _
  failed=0
  for run in "${runs[@]}"; do
    set -- $run
    echo "-- $2 ($1)"
    cat "$fuzz_out/$2.out"
    [ ! -e "$fuzz_out/$2.failed" ] || failed=1
  done
  rm -rf "$fuzz_out"
  [ "$failed" = 0 ]
fi

if [ -n "$dist_pid" ]; then
  section "release artifacts (Linux x86_64 and aarch64), each installed as its users install it: tests/dist/run.sh"
  wait_build dist_pid target/dist-build.log 100 "cargo xtask dist --linux failed"
  # The build's timings and its table of artifacts.
  grep -E '^== |^(artifact|rexd|deskwire|maven|dist)' target/dist-build.log || true
  DIST_BUILT=1 bash tests/dist/run.sh
fi

section "references: cargo xtask docs into target/doc-site/ (mdBook, rustdoc, pdoc, Dokka, Doxygen), its links checked offline (lychee)"
# The Python pages come from the suite's venv (the package is installed there) and the Kotlin
# pages from the javadoc JAR the release build made with Dokka (the same pages; without the
# release build, Dokka runs here). Doxygen is Debian's; mdBook, pdoc and lychee are cached.
command -v doxygen >/dev/null 2>&1 || apt-get install -y -qq doxygen >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq doxygen >/dev/null; }
cap_cache "$cache/docs-target" 1
docs_args=(--python target/python-venv/bin/python)
if [ "${DESKWIRE_DIST:-1}" = 1 ]; then # the release artifacts were built and tested above
  docs_args+=(--kotlin-javadoc-jar "$(echo dist/maven/dev/deskwire/deskwire/*/deskwire-*-javadoc.jar)")
fi
cargo xtask docs "${docs_args[@]}"

section "done"
echo "disk: $(du -sh target | cut -f1) in target/, $(df -h --output=avail . | tail -1 | tr -d ' ') left"
