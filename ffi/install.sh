#!/usr/bin/env bash
# Builds the C library (release) and installs it with its header and pkg-config file:
#   PREFIX/lib/libdeskwire.so.VERSION (+ .so.MAJOR and .so links), PREFIX/lib/libdeskwire.a,
#   PREFIX/include/deskwire.h, PREFIX/lib/pkgconfig/deskwire.pc
#
#   PREFIX=$HOME/.local ffi/install.sh      (default PREFIX=/usr/local; LIBDIR=$PREFIX/lib)
#   cc app.c $(pkg-config --cflags --libs deskwire)
#
# Under /usr or /usr/local, run as root, it refreshes the loader's cache (ldconfig) so programs
# find libdeskwire.so.0 at run time. Under other prefixes they need an rpath
# (-Wl,-rpath,$(pkg-config --variable=libdir deskwire)) or LD_LIBRARY_PATH: README, section C.
# LDCONFIG names the program to run instead (tests/c/run.sh checks the choice with a stand-in).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-/usr/local}
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | sed -n 1p)
major=${version%%.*}

cargo build --release --quiet -p deskwire-ffi
built=${CARGO_TARGET_DIR:-target}/release

install -d "$LIBDIR/pkgconfig" "$INCLUDEDIR"
install -m 644 include/deskwire.h "$INCLUDEDIR/deskwire.h"
install -m 644 "$built/libdeskwire_ffi.a" "$LIBDIR/libdeskwire.a"
install -m 755 "$built/libdeskwire_ffi.so" "$LIBDIR/libdeskwire.so.$version"
# The library's soname is libdeskwire.so.MAJOR (ffi/build.rs).
ln -sf "libdeskwire.so.$version" "$LIBDIR/libdeskwire.so.$major"
ln -sf "libdeskwire.so.$major" "$LIBDIR/libdeskwire.so"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@INCLUDEDIR@|$INCLUDEDIR|" \
  -e "s|@VERSION@|$version|" ffi/deskwire.pc.in >"$LIBDIR/pkgconfig/deskwire.pc"
echo "installed deskwire $version under $PREFIX"
case $PREFIX in
  /usr | /usr/local)
    if [ "$(id -u)" = 0 ]; then
      "${LDCONFIG:-$(command -v ldconfig || echo /sbin/ldconfig)}"
      echo "ran ldconfig: programs find libdeskwire.so.$major in $LIBDIR"
    else
      echo "not root: run ldconfig as root so programs find libdeskwire.so.$major in $LIBDIR" >&2
    fi
    ;;
  *)
    echo "programs find libdeskwire.so.$major in $LIBDIR through -Wl,-rpath,$LIBDIR or LD_LIBRARY_PATH"
    ;;
esac
