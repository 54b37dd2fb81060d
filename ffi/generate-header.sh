#!/usr/bin/env bash
# Writes include/deskwire.h from the ffi crate with cbindgen 0.29.4 (installed into the cache
# when missing). `ffi/generate-header.sh --check` fails when the committed header is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${DESKWIRE_CACHE:-$HOME/.cache/deskwire}/tools"
cbindgen="$tools/bin/cbindgen"
if ! "$cbindgen" --version 2>/dev/null | grep '0.29.4' >/dev/null; then
  cargo install cbindgen --version 0.29.4 --locked --quiet --root "$tools"
fi
out=include/deskwire.h
if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  "$cbindgen" --quiet --config ffi/cbindgen.toml --crate deskwire-ffi --output "$tmp" ffi
  if ! diff -u "$out" "$tmp"; then
    echo "include/deskwire.h is stale: run ffi/generate-header.sh and commit it" >&2
    exit 1
  fi
else
  "$cbindgen" --quiet --config ffi/cbindgen.toml --crate deskwire-ffi --output "$out" ffi
fi
