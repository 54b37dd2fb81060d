#!/usr/bin/env bash
# The release artifacts of `cargo xtask dist`, each installed the way its users install it, on
# the platforms this machine runs (tests/run.sh's "release artifacts" section, every CI run):
#
#   bash tests/dist/run.sh                 builds the Linux x86_64 and aarch64 artifacts
#                                          (cargo xtask dist --linux), then tests them
#   DIST_PROFILE=dist-ci bash tests/dist/run.sh   builds them unoptimized (as CI does: less build time)
#   DIST_BUILT=1 bash tests/dist/run.sh    tests the dist/ that is there
#   DIST_ONLY=rexd,c bash tests/dist/run.sh   some families (rexd, c, python, godot, jvm)
#   bash tests/dist/run.sh --roots         only makes the Debian roots the tests use
#
# As root: it builds Debian roots with mmdebstrap (cached under
# ${DESKWIRE_CACHE:-$HOME/.cache/deskwire}), chroots into them and mounts /proc and /dev there.
#
# - rexd: the static x86_64 binary serves a REXD session (open, exec, fs.read) in an empty
#   chroot (no libc, no /etc); the aarch64 one does too, under a static qemu-user; the .deb installs with dpkg -i in a clean Debian root, where rexd and rex run;
#   both carry bash, zsh and fish completions and man pages (the tarballs in complete/ and man/), which load and render;
#   its systemd units (rexd.service, rexd-listen.service) score under 3 with systemd-analyze security --offline.
# - C: the x86_64 tarball unpacked to a temporary prefix builds examples/c_host with nothing but
#   `pkg-config --cflags --libs deskwire openssl` (its TLS is OpenSSL's), which then completes a RemoteBash over ngircd with
#   the released rexd; the musl static library links a static program that runs; the aarch64
#   tarball links a program that runs under qemu-user.
# - Python: the manylinux2014 x86_64 wheel, installed with pip in a Debian 11 root (glibc 2.31),
#   passes the conformance vectors; the aarch64 wheel, installed with pip under qemu-user in an
#   arm64 root, imports and passes the OA1 vectors. (auditwheel show is checked for every Linux
#   wheel by cargo xtask dist.)
# - Godot: the addon zip unpacked into a new project in the cached Godot root imports cleanly,
#   and its main scene completes a RemoteBash over ngircd to the released rexd --irc.
# - JVM: a Maven project outside the repository depends on dev.deskwire:deskwire:VERSION from
#   dist/maven and completes DeskConnection.remoteBash against rexd --irc, with no Rust on PATH
#   and no jna.library.path; the -sources.jar and -javadoc.jar beside it open and hold the
#   sources and Dokka's pages (tests/dist/maven_jars.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
cache=${DESKWIRE_CACHE:-$HOME/.cache/deskwire}
if [ "$(id -u)" != 0 ]; then
  echo "tests/dist/run.sh needs root: it builds Debian roots and chroots into them" >&2
  exit 1
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | sed -n 1p)
# What a user without Rust has on PATH: the system's directories, not ~/.cargo/bin.
bare_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if env PATH=$bare_path sh -c 'command -v cargo || command -v rustc' >/dev/null; then
  echo "cargo or rustc is in $bare_path: the tests could not tell a Rust-free install" >&2
  exit 1
fi
step() { printf -- '-- %s (at %dm%02ds)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
passed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/deskwire-dist.XXXXXX")
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true
  done
  if declare -F peers_stop_all >/dev/null; then peers_stop_all; fi
  rm -rf "$work"
}
trap cleanup EXIT
# mount_kernel ROOT: /proc and /dev in a root, unmounted on exit.
mount_kernel() {
  mount -t proc proc "$1/proc" && mounted+=("$1/proc")
  mount --bind /dev "$1/dev" && mounted+=("$1/dev")
}
unmount_kernel() {
  umount "$1/dev" "$1/proc"
  local keep=() m
  for m in "${mounted[@]}"; do [ "$m" = "$1/dev" ] || [ "$m" = "$1/proc" ] || keep+=("$m"); done
  mounted=("${keep[@]}")
}
# debian_root NAME MMDEBSTRAP-ARGS...: a root made once with mmdebstrap into the cache.
debian_root() {
  local name=$1 root=$cache/$1
  shift
  if ! [ -f "$root/.deskwire-complete" ]; then
    rm -rf "$root" "$root.tmp"
    mkdir -p "$cache"
    # The mirror served here is a snapshot whose Release file has expired, hence Check-Valid-Until.
    mmdebstrap --quiet --aptopt='Acquire::Check-Valid-Until "false"' "$@" "$root.tmp" >&2
    touch "$root.tmp/.deskwire-complete"
    mv "$root.tmp" "$root"
  fi
  echo "$root"
}

# The roots the tests use. Debian 11 has glibc 2.31 (< 2.34, what the wheels built by pip here
# need); Debian 12's qemu-user (7.2) has no openat2, which rexd confines every path with, so
# qemu-aarch64 comes from sid; the arm64 root is only unpacked (extract: no maintainer
# script has to run under emulation).
bullseye_root() {
  debian_root bullseye-root --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates bullseye
}
qemu_root() { debian_root sid-qemu-user --variant=extract --include=qemu-user sid; }
arm64_root() {
  debian_root bookworm-arm64-extract --variant=extract --architectures=arm64 \
    --include=python3,python3-pip,python3-pytest bookworm
}
# `tests/dist/run.sh --roots` makes the roots and stops (tests/run.sh does it in the background
# while the other suites run: it is downloads and unpacking).
if [ "${1:-}" = --roots ]; then
  step "Debian roots: $(bullseye_root), $(qemu_root), $(arm64_root)"
  exit 0
fi

if [ "${DIST_BUILT:-0}" != 1 ]; then
  profile=${DIST_PROFILE:-dist}
  step "cargo xtask dist --linux --profile $profile"
  cargo xtask dist --linux --profile "$profile"
fi
step "dist/SHA256SUMS"
(cd dist && sha256sum --check --quiet SHA256SUMS)
ok "every file in dist/ matches dist/SHA256SUMS ($(wc -l <dist/SHA256SUMS) files)"

unpack() { # TARBALL: unpacks into $work, prints the directory it made
  tar -xzf "$1" -C "$work"
  echo "$work/$(basename "$1" .tar.gz)"
}

only() { [ -z "${DIST_ONLY:-}" ] || [[ ",$DIST_ONLY," == *",$1,"* ]]; }
# The released rexd serves the tests of the other families too (rexd --irc).
if only rexd || only c || only godot || only jvm; then
  rexd_x64=$(unpack "dist/rexd-$version-x86_64-unknown-linux-musl.tar.gz")
  rexd_arm=$(unpack "dist/rexd-$version-aarch64-unknown-linux-musl.tar.gz")
fi
bullseye=$(bullseye_root)

test_rexd() {
step "rexd: static x86_64 in an empty chroot"
for d in "$rexd_x64" "$rexd_arm"; do
  for f in rexd rex LICENSE-MIT LICENSE-APACHE THIRD-PARTY-LICENSES.txt systemd/rexd.service \
    systemd/rexd-listen.service systemd/default-rexd systemd/default-rexd-listen systemd/rexd.toml \
    complete/rex.bash complete/rexd.bash complete/_rex complete/_rexd complete/rex.fish \
    complete/rexd.fish man/rex.1 man/rexd.1 man/rex-exec.1 man/rex-target-add.1; do
    [ -f "$d/$f" ] || { echo "$(basename "$d").tar.gz has no $f" >&2; exit 1; }
  done
done
# The tarball's completions load in bash, and its man pages render (as the README says to
# use them: source complete/rex.bash, man -l man/rex.1).
for bin in rex rexd; do
  bash -c "source '$rexd_x64/complete/$bin.bash' && complete -p $bin" >"$work/complete-$bin"
  grep -q " $bin\$" "$work/complete-$bin"
done
MANWIDTH=100 man -l "$rexd_x64/man/rex.1" >"$work/man-rex" 2>/dev/null
grep -Eq 'rex +exec' "$work/man-rex"
# Every page a page names (rex.1 names rex-exec(1), ...) is in man/ too.
for named in $(cat "$rexd_x64"/man/*.1 | grep -o 'rex[a-z\\-]*(1)' | sed 's/\\-/-/g; s/(1)//' | sort -u); do
  [ -f "$rexd_x64/man/$named.1" ] || { echo "man/ has no $named.1, which a page names" >&2; exit 1; }
done
ok "the tarballs carry the binaries, complete/ (bash, zsh, fish) and man/ (a page per subcommand); rex.bash loads, rex.1 renders"
empty=$work/empty-root
mkdir -p "$empty/data"
cp "$rexd_x64/rexd" "$empty/rexd"
printf 'read through the chroot\n' >"$empty/data/note.txt"
[ -z "$(find "$empty" -name '*.so*')" ] && ! [ -e "$empty/etc" ] && ! [ -e "$empty/lib" ]
echo "the root holds: $(cd "$empty" && find . -mindepth 1 | sort | tr '\n' ' ')"
python3 tests/dist/rexd_session.py /data /rexd "rexd $version" note.txt $'read through the chroot\n' \
  -- chroot "$empty" /rexd --stdio --root /data
ok "static rexd (x86_64) served session.open, exec.start and fs.read with no libc and no /etc"

step "rexd: static aarch64 under qemu-user, in an empty chroot"
# sid's qemu-aarch64 is static: it runs inside the empty root too.
qemu_root=$(qemu_root)
empty_arm=$work/empty-arm
mkdir -p "$empty_arm/data"
cp "$rexd_arm/rexd" "$empty_arm/rexd"
cp "$qemu_root/usr/bin/qemu-aarch64" "$empty_arm/qemu-aarch64"
if readelf --program-headers "$empty_arm/qemu-aarch64" | grep INTERP >/dev/null; then
  echo "sid's qemu-aarch64 is not static" >&2
  exit 1
fi
# What rexd runs is the x86_64 rexd: qemu-user emulates the one program it starts, not the
# programs that one starts. It lies in the root: rexd confines what it runs to its roots
# (Landlock, where qemu-user passes its system calls on), and /rexd-x86_64 is not rexd's own file.
cp "$rexd_x64/rexd" "$empty_arm/data/rexd-x86_64"
printf 'read under qemu\n' >"$empty_arm/data/note.txt"
echo "$("$empty_arm/qemu-aarch64" --version | sed -n 1p); the root holds: $(cd "$empty_arm" && find . -mindepth 1 | sort | tr '\n' ' ')"
python3 tests/dist/rexd_session.py /data /data/rexd-x86_64 "rexd $version" note.txt $'read under qemu\n' \
  -- chroot "$empty_arm" /qemu-aarch64 /rexd --stdio --root /data
ok "static rexd (aarch64) served the same session under qemu-aarch64 in an empty chroot"

step "rexd: the .deb in a clean Debian root (dpkg -i)"
echo "root: Debian $(cat "$bullseye/etc/debian_version"), $(chroot "$bullseye" ldd --version | sed -n 1p)"
deb_root=$work/deb-root
cp -a "$bullseye" "$deb_root"
cp "dist/rexd_${version}-1_amd64.deb" "$deb_root/tmp/"
mount_kernel "$deb_root"
chroot "$deb_root" dpkg -i "/tmp/rexd_${version}-1_amd64.deb"
chroot "$deb_root" rexd --version | tee "$work/deb-version"
grep -Eq "^rexd $version \(commit ([0-9a-f]+|unknown), features: .*net" "$work/deb-version"
chroot "$deb_root" rex --version | grep "^rex $version (commit " >/dev/null
chroot "$deb_root" rex --help | sed -n 1,3p
# Shell completions and man pages where bash-completion, zsh, fish and man look.
for bin in rex rexd; do
  for f in /usr/share/bash-completion/completions/$bin /usr/share/zsh/vendor-completions/_$bin \
    /usr/share/fish/vendor_completions.d/$bin.fish /usr/share/man/man1/$bin.1.gz; do
    chroot "$deb_root" test -s "$f" || { echo "the .deb installed no $f" >&2; exit 1; }
  done
  chroot "$deb_root" bash -c "source /usr/share/bash-completion/completions/$bin && complete -p $bin" \
    >"$work/deb-complete-$bin"
  grep -q " $bin\$" "$work/deb-complete-$bin"
  zcat "$deb_root/usr/share/man/man1/$bin.1.gz" >"$work/deb-$bin.1"
  grep -A1 '^\.SH NAME' "$work/deb-$bin.1" | tail -1 | grep "^$bin \\\\- " >/dev/null
done
# man itself, where the root has it (man-db is not in a minimal root; then this machine's).
if chroot "$deb_root" sh -c 'command -v man' >/dev/null; then
  chroot "$deb_root" env MANWIDTH=100 man rex >"$work/deb-man-rex" 2>/dev/null
else
  MANWIDTH=100 man -l "$deb_root/usr/share/man/man1/rex.1.gz" >"$work/deb-man-rex" 2>/dev/null
fi
grep -Eq 'rex +exec' "$work/deb-man-rex"
for page in "$rexd_x64"/man/*.1; do
  chroot "$deb_root" test -s "/usr/share/man/man1/$(basename "$page").gz" ||
    { echo "the .deb installed no man page $(basename "$page")" >&2; exit 1; }
done
# Both units, the system users they run as (made by the postinst), and their sandboxes:
# systemd-analyze's exposure score must stay under 3 (before they were hardened, rexd.service
# scored 8.4 EXPOSED); the tarballs carry the same files. --threshold counts on the 0-100 scale
# behind the 0-10 it prints: 29 fails a unit rated 3.0 or more.
for unit in rexd rexd-listen; do
  chroot "$deb_root" test -f /lib/systemd/system/$unit.service -o -f /usr/lib/systemd/system/$unit.service
  cmp "$rexd_x64/systemd/$unit.service" "$deb_root/usr/lib/systemd/system/$unit.service"
  chroot "$deb_root" getent passwd "$unit" | tee -a "$work/deb-users"
  if ! systemd-analyze security --offline=true --threshold=29 --root="$deb_root" "$unit.service" \
    >"$work/$unit-security"; then
    cat "$work/$unit-security" >&2
    echo "$unit.service is rated 3 or more (systemd-analyze security, above)" >&2
    exit 1
  fi
  tail -1 "$work/$unit-security"
done
# (systemd-analyze verify --root is left out: it needs systemd's own units, sysinit.target and
# the like, in the root, and this one has no systemd.)
# rexd-listen.service's command line with the config it ships, and its root made as systemd would.
chroot "$deb_root" sh -c 'mkdir -p /var/lib/rexd-listen && install -m 600 /dev/null /tmp/tokens &&
  echo "ci:0123456789abcdef0123456789abcdef" >/tmp/tokens &&
  rexd --config /etc/rexd/rexd.toml --listen 127.0.0.1:7070 --token-file /tmp/tokens --check-config' |
  tee "$work/deb-check-listen"
grep -q "the configuration is valid" "$work/deb-check-listen"
chroot "$deb_root" test -f /usr/share/doc/rexd/THIRD-PARTY-LICENSES.txt
# The sample config it ships is valid (its root and audit directory made first).
chroot "$deb_root" sh -c 'mkdir -p /srv/app /var/log/rexd &&
  rexd --config /usr/share/doc/rexd/examples/rexd.toml --stdio --check-config' | tee "$work/deb-check"
grep -q "the configuration is valid" "$work/deb-check"
# /etc/rexd is where the units read the secret and the tokens from; its README says what to put there.
chroot "$deb_root" grep -q /etc/rexd/secret /etc/rexd/README
chroot "$deb_root" grep -q /etc/rexd/tokens /etc/rexd/README
synopsis=$(dpkg-deb --field "dist/rexd_${version}-1_amd64.deb" Description | sed -n 1p)
if [ ${#synopsis} -ge 80 ]; then
  echo "the .deb's synopsis is ${#synopsis} characters (Debian wants under 80): $synopsis" >&2
  exit 1
fi
# Installed, not enabled: no wants/ link points at either.
if chroot "$deb_root" sh -c 'ls /etc/systemd/system/*.wants/rexd*.service' 2>/dev/null; then
  echo "installing the .deb enabled a rexd unit" >&2
  exit 1
fi
unmount_kernel "$deb_root"
dpkg-deb --field "dist/rexd_${version}-1_arm64.deb" Architecture Version | tr "\n" " "; echo
[ "$(dpkg-deb --field "dist/rexd_${version}-1_arm64.deb" Architecture)" = arm64 ]
dpkg-deb --contents "dist/rexd_${version}-1_arm64.deb" | grep '\./usr/bin/rexd$' >/dev/null
ok "rexd_${version}-1_amd64.deb installed with dpkg -i; rexd --version and rex --help ran; completions and man pages are in place; rexd.service and rexd-listen.service are there, disabled, with their users, each under exposure 3"

}

if only c || only godot || only jvm; then
  echo "-- IRC server and the released rexd --irc"
  source tests/peers.sh
  trap cleanup EXIT # peers.sh set its own; ours stops the peers too
  export PEERS_REXD=$rexd_x64/rexd
  peers_start_ngircd
  peers_start_rexd_irc '#desk' rexd --allow-from desk
  peers_start_rexd_irc '#chost' deskbot
fi

test_c() {
step "C: the x86_64 tarball, pkg-config, its examples/c_host against rexd --irc"
c_x64=$(unpack "dist/deskwire-$version-x86_64-unknown-linux-gnu.tar.gz")
export PKG_CONFIG_PATH=$c_x64/lib/pkgconfig
echo "pkg-config --cflags --libs deskwire: $(pkg-config --cflags --libs deskwire)"
[ "$(pkg-config --modversion deskwire)" = "$version" ]
# The example host and the OA1 reference the header points to come with it.
cmp docs/oa1.md "$c_x64/share/doc/deskwire/oa1.md"
gcc -std=c11 -Wall -Wextra -Werror "$c_x64/share/doc/deskwire/examples/c_host.c" \
  $(pkg-config --cflags --libs deskwire openssl) -o "$work/c_host"
LD_LIBRARY_PATH=$(pkg-config --variable=libdir deskwire) "$work/c_host" 127.0.0.1 "$PEERS_IRC_PORT" \
  '#chost' chost deskbot 'echo c_host over IRC' | tee "$work/c_host.out"
[ "$(cat "$work/c_host.out")" = "c_host over IRC" ]
unset PKG_CONFIG_PATH
ok "the tarball's examples/c_host.c built with pkg-config from the unpacked tarball and completed a RemoteBash"

step "C: the musl static library links a static program"
c_musl=$(unpack "dist/deskwire-$version-x86_64-unknown-linux-musl.tar.gz")
zig=("$cache/dist-venv/bin/python" -m ziglang)
# zig cc is the musl C compiler here; pkg-config --static adds the unwinder the tarball carries.
"${zig[@]}" cc -target x86_64-linux-musl -static -std=c11 -Wall -Werror tests/dist/probe.c \
  $(PKG_CONFIG_PATH=$c_musl/lib/pkgconfig pkg-config --static --cflags --libs deskwire) -o "$work/probe-static"
if readelf --program-headers "$work/probe-static" | grep 'INTERP\|DYNAMIC' >/dev/null; then
  echo "the program linked with libdeskwire.a (musl) is not static" >&2
  exit 1
fi
"$work/probe-static" | tee "$work/probe.out"
grep -qx "deskwire $version" "$work/probe.out"
ok "a static C program linked with libdeskwire.a (musl) ran"

step "C: the aarch64 tarball links a program that runs under qemu-user"
c_arm=$(unpack "dist/deskwire-$version-aarch64-unknown-linux-gnu.tar.gz")
PKG_CONFIG_PATH=$c_arm/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR= \
  aarch64-linux-gnu-gcc -std=c11 -Wall -Werror tests/dist/probe.c \
  $(PKG_CONFIG_PATH=$c_arm/lib/pkgconfig pkg-config --cflags --libs deskwire) -o "$work/probe-arm64"
qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$c_arm/lib" "$work/probe-arm64" | tee "$work/probe-arm.out"
grep -qx "deskwire $version" "$work/probe-arm.out"
ok "an aarch64 C program linked against the tarball's libdeskwire.so ran under qemu-aarch64"

}

test_python() {
step "Python: the manylinux2014 x86_64 wheel with pip in Debian 11 (glibc < 2.34), the conformance vectors"
py_root=$work/py-root
cp -a "$bullseye" "$py_root"
mkdir -p "$py_root/dist" "$py_root/repo/bindings/python" "$py_root/repo/tests"
cp dist/*.whl "$py_root/dist/"
cp -r bindings/python/tests "$py_root/repo/bindings/python/tests"
cp -r tests/vectors "$py_root/repo/tests/vectors"
mkdir -p "$py_root/repo/core"
cp -r core/schemas "$py_root/repo/core/schemas" # the vectors' schema half compares against them
# pip fetches pytest and jsonschema from PyPI: the root resolves names and trusts the
# certificate authorities the way this machine does.
cp /etc/resolv.conf "$py_root/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$py_root/etc/ssl/certs/ca-certificates.crt"
mount_kernel "$py_root"
chroot "$py_root" env -i PATH=$bare_path HOME=/root PIP_DISABLE_PIP_VERSION_CHECK=1 \
  PIP_CERT=/etc/ssl/certs/ca-certificates.crt sh -euc "
  python3 -m venv /venv
  /venv/bin/pip install --quiet --no-index --only-binary=:all: --find-links /dist deskwire
  /venv/bin/pip install --quiet 'pytest==8.4.2' 'jsonschema==4.25.1'
  cd /
  /venv/bin/python -c 'import deskwire, glob; print(\"deskwire\", deskwire.__version__, \"from\", glob.glob(\"/venv/lib/*/site-packages/deskwire-*.dist-info/WHEEL\")[0])'
  grep '^Tag:' /venv/lib/*/site-packages/deskwire-*.dist-info/WHEEL
  test \"\$(/venv/bin/python -c 'import deskwire; print(deskwire.__version__)')\" = $version
  cd /repo/bindings/python && DESKWIRE_REPO=/repo /venv/bin/python -m pytest -q -p no:cacheprovider tests/test_vectors_*.py
" | tee "$work/py.log"
grep -q 'manylinux2014_x86_64' "$work/py.log"
unmount_kernel "$py_root"
ok "the manylinux2014 wheel installed with pip on glibc $(chroot "$bullseye" ldd --version | sed -n 1p | awk '{print $NF}') and passed the vectors"

step "Python: the aarch64 wheel with pip under qemu-user in an arm64 root"
arm_root=$(arm64_root)
arm_site=$work/arm-site
qpy() { qemu-aarch64 -L "$arm_root" "$arm_root/usr/bin/python3" "$@"; }
qpy -c 'import platform; print("python", platform.python_version(), platform.machine())'
PIP_DISABLE_PIP_VERSION_CHECK=1 qpy -m pip install --quiet --root-user-action=ignore --no-index --only-binary=:all: \
  --find-links dist --target "$arm_site" deskwire
ls "$arm_site" | grep 'deskwire-.*dist-info' >/dev/null
grep '^Tag:' "$arm_site"/deskwire-*.dist-info/WHEEL | tee "$work/arm-tag"
grep -q 'manylinux2014_aarch64' "$work/arm-tag"
(cd bindings/python && PYTHONPATH=$arm_site DESKWIRE_REPO=$repo \
  qpy -m pytest -q -p no:cacheprovider -W ignore::pytest.PytestConfigWarning tests/test_vectors_oa1.py)
ok "the manylinux2014 aarch64 wheel imported and passed the OA1 vectors under qemu-aarch64"

}

test_godot() {
step "Godot: the addon zip in a new project in the Godot root"
godot_root=$cache/godot-root
[ -x "$godot_root/usr/bin/godot" ] || { echo "no Godot root at $godot_root: bash godot/run_tests.sh makes it" >&2; exit 1; }
project_dir=$(mktemp -d "$godot_root/tmp/deskwire-addon.XXXXXX")
in_root=${project_dir#"$godot_root"}
cp tests/dist/godot/project.godot tests/dist/godot/main.tscn tests/dist/godot/main.gd "$project_dir/"
(cd "$project_dir" && python3 -m zipfile -e "$repo/dist/deskwire-godot-$version.zip" .)
ls "$project_dir/addons/deskwire/bin"
for file in plugin.cfg plugin.gd icon.svg; do
  [ -f "$project_dir/addons/deskwire/$file" ] || { echo "the addon zip has no addons/deskwire/$file" >&2; exit 1; }
done
mount_kernel "$godot_root"
godot_import() {
  local attempt
  for attempt in 1 2; do
    if chroot "$godot_root" env HOME=/tmp sh -c "cd '$in_root' && exec godot --headless --import --frame-delay 800" \
      >"$work/godot-import.log" 2>&1; then
      return 0
    fi
    # godotengine/godot#111048: the first import of an extension can crash on exit; once more.
    if [ "$attempt" = 1 ] && grep -q 'Program crashed with signal 11' "$work/godot-import.log"; then continue; fi
    cat "$work/godot-import.log" >&2
    return 1
  done
}
godot_import
grep -q 'res://addons/deskwire/deskwire.gdextension' "$project_dir/.godot/extension_list.cfg"
# Cleanly: the library loaded (no missing or unloadable library, no script error). Godot 4.6's
# import prints "Verifying GDExtensions..." on success, so the words of its failures are named.
if grep -q "ERROR\|Parse Error\|Can't open\|dynamic library not found\|No GDExtension library found" \
  "$work/godot-import.log"; then
  cat "$work/godot-import.log" >&2
  echo "the import complained about the extension or a script" >&2
  exit 1
fi
DESKWIRE_IRC=$PEERS_IRC_ADDR DESKWIRE_EXPECT="godot-$version" timeout 120 \
  chroot "$godot_root" env HOME=/tmp DESKWIRE_IRC="$PEERS_IRC_ADDR" DESKWIRE_EXPECT="godot-$version" \
  sh -c "cd '$in_root' && exec godot --headless" 2>&1 | tee "$work/godot.log"
grep -q "addon check: RemoteBash over IRC: godot-$version" "$work/godot.log"
grep -q 'Initialize godot-rust' "$work/godot.log"
if grep -q 'SCRIPT ERROR\|handle_crash' "$work/godot.log"; then
  echo "script errors or a crash in the engine's output (above)" >&2
  exit 1
fi
unmount_kernel "$godot_root"
rm -rf "$project_dir"
ok "the addon zip, unpacked into a new project, imported and its scene completed a RemoteBash"

}

test_jvm() {
step "JVM: the sources and javadoc JARs beside the JAR in dist/maven (Maven Central requires both)"
# Each opens as a ZIP whose every entry's CRC holds; the sources JAR carries every Kotlin file
# the JAR is compiled from and no native library; the javadoc JAR is Dokka's HTML, with a page
# for every public top-level type of bindings/kotlin/src/main/kotlin.
python3 tests/dist/maven_jars.py "dist/maven/dev/deskwire/deskwire/$version" "$version" bindings/kotlin \
  | tee "$work/maven-jars.log"
ok "$(tail -1 "$work/maven-jars.log")"

step "JVM: a Maven project outside the repository, dev.deskwire:deskwire:$version from dist/maven"
jvm=$work/jvm-app
mkdir -p "$jvm/src/main/kotlin"
sed -e "s|@VERSION@|$version|" -e "s|@REPO@|file://$repo/dist/maven|" tests/dist/jvm/pom.xml >"$jvm/pom.xml"
cp tests/dist/jvm/Main.kt "$jvm/src/main/kotlin/Main.kt"
# cargo xtask dist's mvn deploy also installs the JAR into this local repository, and Maven
# prefers a local copy to any remote: without this the JAR would not come from dist/maven.
rm -rf "$cache/m2/dev/deskwire"
(cd "$jvm" && env -u LD_LIBRARY_PATH PATH=$bare_path DESKWIRE_IRC_PORT="$PEERS_IRC_PORT" DESKWIRE_EXPECT="jvm-$version" \
  mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$cache/m2" compile exec:java) | tee "$work/jvm.log"
echo # Maven -q still ends with bare colour resets; keep the next line on its own.
grep -q "jvm: RemoteBash over IRC: jvm-$version" "$work/jvm.log"
grep -q 'deskwire-dist' "$cache/m2/dev/deskwire/deskwire/$version/_remote.repositories"
ok "the JAR from dist/maven completed DeskConnection.remoteBash with no Rust on PATH and no jna.library.path"

}

for family in rexd c python godot jvm; do
  if only "$family"; then "test_$family"; fi
done
echo "release artifacts: $passed passed, 0 failed"
