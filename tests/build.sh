#!/usr/bin/env bash
# Builds what a suite runs: `bash tests/build.sh -p rexd --bin rexd` is `cargo build --quiet -p rexd
# --bin rexd`.
#
# Under tests/run.sh (DESKWIRE_WORKSPACE_BUILD=1) every suite builds the workspace's whole test
# selection instead, which its Rust tests have built already: Cargo resolves the dependencies'
# features for the packages named, so `-p rexd` alone turns tokio, syn, serde_json and the core
# into other builds of them, and each suite rebuilding its own set took minutes of a CI run.
set -euo pipefail
if [ "${DESKWIRE_WORKSPACE_BUILD:-0}" = 1 ]; then
  exec cargo build --quiet --workspace --lib --bins --tests --examples
fi
exec cargo build --quiet "$@"
