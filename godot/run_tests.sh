#!/usr/bin/env bash
# The Godot suite: builds the extension, installs it into the addon, runs the GDScript tests and
# the README's GDScript in a real Godot 4 engine against a real IRC server and `rexd --irc`, and
# checks the addon's files.
#
#   bash godot/run_tests.sh          (as root: it mounts /proc, /dev and the repository into
#                                     the Godot root and chroots into it)
#
# Godot comes from Debian sid (4.6 here; this machine's Debian is too old for it), installed
# with mmdebstrap into ${DESKWIRE_CACHE:-$HOME/.cache/deskwire}/godot-root once and reused.
# The engine is not optional: without it this script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "godot/run_tests.sh needs root: it mounts /proc, /dev and the repository into the Godot root and chroots" >&2
  exit 1
fi
repo=$PWD
cache=${DESKWIRE_CACHE:-$HOME/.cache/deskwire}
root=$cache/godot-root
addon=godot/addons/deskwire
lib_name=libdeskwire_godot.so

echo "-- build the extension"
bash tests/build.sh -p deskwire-godot -p rexd -p deskwire-integration
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
export PEERS_REXD=$target/debug/rexd
mkdir -p "$addon/bin/linux-x86_64"
cp "$target/debug/$lib_name" "$addon/bin/linux-x86_64/$lib_name"

echo "-- the library exports the entry symbol the .gdextension names"
entry=$(sed -n 's/^entry_symbol *= *"\(.*\)"/\1/p' "$addon/deskwire.gdextension")
[ -n "$entry" ] || { echo "no entry_symbol in deskwire.gdextension" >&2; exit 1; }
# Not `grep -q` after a pipe: it exits at the first match, the writer before it then dies of
# SIGPIPE, and pipefail fails the check (43 of 300 runs here).
if ! nm -D --defined-only "$addon/bin/linux-x86_64/$lib_name" | awk '{print $3}' | grep -x "$entry" >/dev/null; then
  echo "$lib_name does not export $entry" >&2
  exit 1
fi
echo "exports $entry"

echo "-- the .gdextension points at the files a build produces"
# Linux x86_64 is built here, so its file must exist; the other platforms' files must be named
# the way cargo names the cdylib for that target.
expect_name() { # platform-key file-name; sets $path
  path=$(sed -n "s/^$1 *= *\"res:\/\/\(.*\)\"/\1/p" "$addon/deskwire.gdextension")
  [ -n "$path" ] || { echo "no $1 library in deskwire.gdextension" >&2; return 1; }
  case "$path" in
    addons/deskwire/*) ;;
    *) echo "$1: $path is outside addons/deskwire (the folder a project copies)" >&2; return 1 ;;
  esac
  [ "$(basename "$path")" = "$2" ] || { echo "$1: $path is not named $2" >&2; return 1; }
  echo "$1 -> $path"
}
expect_name linux.x86_64 $lib_name
[ -f "godot/$path" ] || { echo "linux.x86_64: godot/$path was not built" >&2; exit 1; }
expect_name linux.arm64 $lib_name
expect_name windows.x86_64 deskwire_godot.dll
expect_name macos libdeskwire_godot.dylib
expect_name android.arm64 $lib_name
api=$(sed -n 's/.*"api-4-\([0-9]*\)".*/\1/p' godot/Cargo.toml)
minimum=$(sed -n 's/^compatibility_minimum *= *"\(.*\)"/\1/p' "$addon/deskwire.gdextension")
[ "$minimum" = "4.$api" ] || { echo "compatibility_minimum $minimum but built with api-4-$api" >&2; exit 1; }
echo "compatibility_minimum $minimum matches api-4-$api"

echo "-- the Godot root ($root)"
# ca-certificates: Godot loads the system CA bundle for StreamPeerTLS at start-up. xvfb, xauth
# and Mesa's GL (llvmpipe, the software renderer): the demo's screenshot, rendered by the
# compatibility renderer (OpenGL 3) on a virtual X display.
gui_packages="xvfb xauth libgl1 libglx-mesa0 libgl1-mesa-dri"
if ! [ -x "$root/usr/bin/godot" ] || ! [ -f "$root/etc/ssl/certs/ca-certificates.crt" ]; then
  command -v mmdebstrap >/dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq mmdebstrap >/dev/null
  }
  rm -rf "$root.tmp"
  mkdir -p "$cache"
  # The mirror served here is a snapshot whose Release file has expired, hence Check-Valid-Until.
  mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="godot,ca-certificates,${gui_packages// /,}" sid "$root.tmp"
  rm -rf "$root"
  mv "$root.tmp" "$root"
fi
# A root cached before the screenshot was added gets what it lacks (about 10 s, once).
# shellcheck disable=SC2086 # the package list is words
if ! chroot "$root" dpkg-query -W $gui_packages >/dev/null 2>&1; then
  echo "adding $gui_packages to the cached root"
  added_at=$(date +%s)
  chroot "$root" env DEBIAN_FRONTEND=noninteractive sh -c "
    apt-get -qq -o Acquire::Check-Valid-Until=false update &&
    apt-get -qq -y -o Dpkg::Use-Pty=0 --no-install-recommends install $gui_packages >/dev/null &&
    apt-get clean && rm -rf /var/lib/apt/lists/*"
  echo "added in $(($(date +%s) - added_at)) s"
fi

# Per-run mount points and home, so two runs sharing the cache do not meet.
run_dir=$(mktemp -d "$root/tmp/deskwire-run.XXXXXX")
in_root=${run_dir#"$root"}
mounted=()
cleanup() {
  local m i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true; done
  rm -rf "$run_dir" 2>/dev/null || true
  if declare -F peers_stop_all >/dev/null; then peers_stop_all; fi
  # services-irc stops InspIRCd and Atheme when its stdin closes.
  if [ -n "${services_fd:-}" ]; then exec {services_fd}>&-; wait "$services_pid" || true; fi
}
trap cleanup EXIT
mkdir -p "$run_dir/repo" "$run_dir/home"
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount --bind /dev "$root/dev" && mounted+=("$root/dev")
mount --bind "$repo" "$run_dir/repo" && mounted+=("$run_dir/repo")
godot_in_root() { # args... : runs godot in the demo project, as the tests do
  chroot "$root" env HOME="$in_root/home" sh -c "cd '$in_root/repo' && exec godot \"\$@\"" godot "$@"
}
# import_in_root DIR: imports the project in DIR (a path in the root), which registers the extension.
# Godot 4.6's headless editor, meeting a GDExtension for the first time, crashes on exit while
# it generates the extension's docs (signal 11; godotengine/godot#111048, open in 4.6) unless
# frames are slow: --frame-delay 800 avoids it on an idle machine. On a busy one it can still
# crash; the extension is registered by then, so a second run passes. Any other failure fails.
import_in_root() {
  local attempt
  for attempt in 1 2; do
    if chroot "$root" env HOME="$in_root/home" sh -c "cd '$1' && exec godot --headless --import --frame-delay 800" \
      >"$run_dir/import.log" 2>&1; then
      return 0
    fi
    if [ "$attempt" = 1 ] && grep -q 'handle_crash: Program crashed with signal 11' "$run_dir/import.log"; then
      echo "the first import crashed (godotengine/godot#111048); importing again"
      continue
    fi
    cat "$run_dir/import.log" >&2
    echo "importing $1 failed" >&2
    return 1
  done
}
echo "$(godot_in_root --version | tail -n 1)"

echo "-- IRC server and rexd --irc"
source tests/peers.sh
channel='#deskwire-godot'
# The server also takes TLS, with a certificate made for this run (trusted by the tests only).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost -keyout "$run_dir/tls.key" -out "$run_dir/tls.pem" 2>/dev/null
tls_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
peers_start_ngircd '[SSL]' "CertFile = $run_dir/tls.pem" "KeyFile = $run_dir/tls.key" "Ports = $tls_port"
trap cleanup EXIT # peers.sh set its own; ours stops the peers too
# Every test desk has its own nick, so rexd takes requests from any nick here.
peers_start_rexd_irc "$channel" deskbot
# A second desk channel whose rexd authenticates frames with a shared secret.
secret=$(head -c 18 /dev/urandom | base64)
printf '%s\n' "$secret" >"$run_dir/secret"
chmod 600 "$run_dir/secret" # rexd refuses a secret others may read
peers_start_rexd_irc '#deskwire-godot-auth' deskauth --secret-file "$run_dir/secret"
export DESKWIRE_IRC=$PEERS_IRC_ADDR DESKWIRE_CHANNEL=$channel DESKWIRE_REMOTE_NICK=deskbot
export DESKWIRE_IRC_TLS_PORT=$tls_port DESKWIRE_TLS_CERT=$in_root/tls.pem
export DESKWIRE_AUTH_CHANNEL='#deskwire-godot-auth' DESKWIRE_AUTH_NICK=deskauth DESKWIRE_AUTH_SECRET=$secret
export DESKWIRE_AUTH_SECRET_FILE=$in_root/secret
# The README's scripts use the defaults on both ends: rexd joins #desk as rexd and serves the
# desk nick "desk", as the README tells its readers to start it.
peers_start_rexd_irc '#desk' rexd --allow-from desk
echo "ngircd on $PEERS_IRC_ADDR; rexd --irc as deskbot in $channel, with a secret as deskauth in $DESKWIRE_AUTH_CHANNEL, and as rexd in #desk"
# One rexd on one connection serving ten channels, one per desk of a DeskConnection
# (tests/test_desk_connection.gd).
office_channels=()
for i in $(seq 0 9); do office_channels+=("#office-$i"); done
office_args=()
for c in "${office_channels[@]:1}"; do office_args+=(--channel "$c"); done
peers_start_rexd_irc "${office_channels[0]}" officebot "${office_args[@]}"
export DESKWIRE_OFFICE_CHANNELS="${office_channels[*]}" DESKWIRE_OFFICE_NICK=officebot
echo "rexd --irc as officebot in ${office_channels[*]} (one connection)"

echo "-- InspIRCd with Atheme (TLS, SASL), and rexd --irc there serving the account bob"
# services-irc prints its ports and files as one JSON line and keeps the servers up until its
# stdin closes (cleanup closes it).
mkfifo "$run_dir/services.stdin"
"$target/debug/services-irc" <"$run_dir/services.stdin" >"$run_dir/services.json" 2>"$run_dir/services.log" &
services_pid=$!
exec {services_fd}>"$run_dir/services.stdin"
for _ in $(seq 1 300); do [ -s "$run_dir/services.json" ] && break; sleep 0.1; done
[ -s "$run_dir/services.json" ] || { cat "$run_dir/services.log" >&2; echo "services-irc did not start" >&2; exit 1; }
services() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$run_dir/services.json" "$1"; }
cp "$(services ca)" "$run_dir/services-ca.pem"
services password >"$run_dir/sasl-password"
chmod 600 "$run_dir/sasl-password"
PEERS_IRC_ADDR=127.0.0.1:$(services port) peers_start_rexd_irc '#deskwire-godot-sasl' rexsasl \
  --allow-from "account:$(services account)" --sasl-user "$(services account)" \
  --sasl-password-file "$run_dir/sasl-password"
export DESKWIRE_SASL_TLS_PORT=$(services tls_port) DESKWIRE_SASL_PORT=$(services port)
export DESKWIRE_SASL_CA=$in_root/services-ca.pem
export DESKWIRE_SASL_ACCOUNT=$(services account) DESKWIRE_SASL_PASSWORD=$(services password)
export DESKWIRE_SASL_CHANNEL='#deskwire-godot-sasl' DESKWIRE_SASL_REMOTE=rexsasl

echo "-- the README's GDScript, for tests/test_readme.gd"
# Every gdscript code block of the README's Godot section is a whole script whose first line
# names it ("# desk_node.gd: ..."); test_readme.gd runs each one it knows and fails on others.
mkdir -p "$run_dir/readme"
awk -v dir="$run_dir/readme" '
  !inside && /^## / { godot = ($0 == "## Godot") }
  godot && !inside && /^```gdscript$/ { inside = 1; file = ""; next }
  inside && /^```$/ { inside = 0; if (file != "") close(file); next }
  inside && file == "" {
    if (!match($0, /^# [a-z_]+\.gd:/)) {
      print "a gdscript block in the README does not start with \"# name.gd: ...\": " $0 > "/dev/stderr"; exit 1
    }
    name = substr($0, 3, RLENGTH - 3)
    if (name in seen) { print "two gdscript blocks in the README are named " name > "/dev/stderr"; exit 1 }
    seen[name] = 1
    file = dir "/" name
  }
  inside { print > file }
' README.md
ls "$run_dir/readme" | grep '\.gd$' >/dev/null || { echo "the README's Godot section has no gdscript block" >&2; exit 1; }
echo "README blocks: $(ls "$run_dir/readme" | tr '\n' ' ')"
export DESKWIRE_README_GD=$in_root/readme
# desk_node.gd asks rexd, which runs here, for uname -a.
DESKWIRE_UNAME=$(uname -a)
export DESKWIRE_UNAME

echo "-- import the demo project"
rm -rf godot/demo/.godot
import_in_root "$in_root/repo/godot/demo"
tail -n 3 "$run_dir/import.log"
grep -q 'res://addons/deskwire/deskwire.gdextension' godot/demo/.godot/extension_list.cfg || {
  echo "the editor did not register the extension" >&2
  exit 1
}

echo "-- the class reference in the editor's help (doc comments through register-docs)"
# A scratch copy of the demo with a test-only editor plugin that opens each class's help page
# and writes what it shows.
scratch=$run_dir/docs-project
mkdir -p "$scratch"
cp -rL godot/demo/. "$scratch/"
rm -rf "$scratch/.godot"
mkdir -p "$scratch/addons/doc_check"
cp godot/tests/doc_check/plugin.cfg godot/tests/doc_check/plugin.gd "$scratch/addons/doc_check/"
# The addon's own plugin is enabled too, as a user enables it: it must load and stay quiet.
printf '\n[editor_plugins]\n\nenabled=PackedStringArray("res://addons/deskwire/plugin.cfg", "res://addons/doc_check/plugin.cfg")\n' >>"$scratch/project.godot"
in_scratch=$in_root/docs-project
import_in_root "$in_scratch"
# The editor can crash or stall on its way up under load (one CI run wrote no page at all, and
# its log was not kept), so a run without pages is tried once more and its log is shown.
for attempt in 1 2; do
  started=$SECONDS
  chroot "$root" env HOME="$in_root/home" DESKWIRE_DOC_OUT="$in_root/help.json" \
    sh -c "cd '$in_scratch' && timeout 240 godot --headless --editor" >"$run_dir/editor.log" 2>&1 &&
    status=0 || status=$?
  [ -s "$run_dir/help.json" ] && break
  echo "the editor wrote no help pages (attempt $attempt, exit status $status after $((SECONDS - started)) s); the end of its log:" >&2
  tail -n 25 "$run_dir/editor.log" >&2
done
python3 - "$run_dir/help.json" "$run_dir/editor.log" <<'PY'
import json, re, sys
try:
    help = json.load(open(sys.argv[1]))
except OSError as e:
    sys.exit(f"the editor wrote no help pages: {e}")
pages, members = help["pages"], help["members"]
want = {
    "DeskRpcClient": ["The desk end of OA1", "connect_to_server", "request_completed", "auth_secret", "never saved into a scene file", "not_polled"],
    "DeskConnection": ["One IRC connection that carries many desks", "chat_received", "membership_changed", "send_text", "reserved_prefix", "chat_enabled", "membership_enabled"],
    "RemoteCall": ["One request sent by", "completed", "tool_message", "answers no tool call"],
    "ToolGate": ["Decides which tools each NPC", "Seats npc_id at desk_id", "tools_changed", "parse_slash", "set_context", "The rules calls are checked against", '{"default": "allow", "rules": []}', "openai_chat (the default)"],
    "RemoteBashTool": ["The RemoteBash tool", "definition", "handles", "run", "the one a model's call to it carries"],
    "Oa1Client": ["The desk end of OA1 over an IRC link you run yourself", "poll_output", "last_error"],
    "Oa1Server": ["The remote end of OA1 over an IRC link you run yourself", "respond", "fail"],
    "Oa1": ["OA1's building blocks", "parse_frame", "split"],
    "IrcMessage": ["IRC lines split into their parts", "parse"],
}
problems = [f"{cls}: no class {cls} in the help" for cls in want if cls not in pages]
problems += [f"{cls}: '{text}' is not on its page" for cls, texts in want.items() for text in texts if text not in pages.get(cls, "")]
headings = r"\n(?:Properties|Methods|Signals|Property Descriptions|Method Descriptions|Constants|Enumerations)\n"
counted = 0
for cls, page in sorted(pages.items()):
    lines = page.splitlines()
    brief = lines[3].strip() if len(lines) > 3 else ""
    if not brief:
        problems.append(f"{cls}: no description of the class")
    if "There is currently no description" in page:
        problems.append(f"{cls}: the page says a member has no description")
    # Each member's entry: "● HEADER\n DESCRIPTION", up to the next entry or heading.
    entries = []
    for segment in re.split(r"\n\s*●\s*", page)[1:]:
        head, _, body = segment.partition("\n")
        entries.append((head.replace("\xa0", " "), re.split(headings, body)[0].strip()))
    def described(kind, name, pattern):
        global counted
        counted += 1
        bodies = [body for head, body in entries if re.search(pattern, head)]
        if not bodies:
            problems.append(f"{cls}: {kind} {name} is not on its page")
        elif len(bodies[0]) < 10:
            problems.append(f"{cls}: {kind} {name} has no description ({bodies[0]!r})")
    m = members[cls]
    for name in m["methods"]:
        described("method", name, rf"(^|\s){re.escape(name)}\(")
    for name in m["signals"]:
        described("signal", name, rf"^{re.escape(name)}\(")
    for prop in m["properties"]:
        described("property", prop["name"], rf"{re.escape(prop['getter'])}\(\) getter")
    print(f"{cls}: {brief}")
if not help.get("deskwire_plugin_enabled"):
    problems.append("the addon's plugin (addons/deskwire/plugin.cfg) did not load in the editor")
if re.search(r"(^|\s)deskwire: ", open(sys.argv[2]).read(), re.M):
    problems.append("the addon's plugin reported a problem (editor.log)")
print(f"{counted} methods, properties and signals of {len(pages)} classes, each with its description")
if problems:
    sys.exit("the editor's help:\n  " + "\n  ".join(problems))
PY
plugin_version=$(sed -n 's/^version="\(.*\)"/\1/p' "$addon/plugin.cfg")
crate_version=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "deskwire-godot"))')
[ "$plugin_version" = "$crate_version" ] || { echo "plugin.cfg says version $plugin_version, the crate is $crate_version" >&2; exit 1; }
echo "plugin.cfg version $plugin_version matches the crate"

echo "-- GDScript tests in the engine"
set +e
# The suite takes about a minute; a wedged engine fails the run instead of holding it forever.
timeout 900 chroot "$root" env HOME="$in_root/home" sh -c "cd '$in_root/repo' && exec godot --headless --path godot/demo -s tests/run.gd" 2>&1 | tee "$run_dir/godot.log"
status=${PIPESTATUS[0]}
set -e
[ "$status" -ne 124 ] || echo "the GDScript tests did not finish within 900 s" >&2
if ! grep -q 'Initialize godot-rust' "$run_dir/godot.log"; then
  echo "the extension was not loaded" >&2
  status=1
fi
# A GDScript runtime error ends the test function early without failing it: count it here.
if grep -q 'SCRIPT ERROR\|Parse Error\|handle_crash' "$run_dir/godot.log"; then
  echo "script errors or a crash in the engine's output (above)" >&2
  status=1
fi
# A panic in the extension (godot-rust catches it and prints "ERROR: [panic file:line]") is a
# crash the engine happened to survive, not a refusal: count it too.
if grep -q '^ERROR: \[panic ' "$run_dir/godot.log"; then
  echo "a panic in the extension (above)" >&2
  status=1
fi
# Everything the tests made is gone by the end: a client, call or gate kept alive (a reference
# cycle through a signal, a call never settled) shows up here.
if grep -q 'ObjectDB instances leaked at exit\|resources still in use at exit' "$run_dir/godot.log"; then
  echo "objects leaked at exit (above)" >&2
  status=1
fi
[ "$status" -eq 0 ] || exit "$status"

echo "-- the desk demo on screen: Xvfb, the compatibility renderer (OpenGL 3) on Mesa's llvmpipe"
# tests/screenshot.gd runs desk.tscn in a window, runs a long command through rexd --irc, takes a
# screenshot and checks the desk's screen in it; the PNG is kept for a person to look at.
shot_started=$(date +%s)
if ! chroot "$root" env HOME="$in_root/home" DESKWIRE_SHOT_OUT="$in_root/godot-demo.png" \
  sh -c "cd '$in_root/repo/godot/demo' && exec timeout 120 xvfb-run -a -s '-screen 0 960x600x24' godot --rendering-driver opengl3 --path . -s tests/screenshot.gd" \
  >"$run_dir/screenshot.log" 2>&1; then
  cat "$run_dir/screenshot.log" >&2
  echo "the screenshot test failed" >&2
  exit 1
fi
if grep -q 'SCRIPT ERROR\|Parse Error\|handle_crash' "$run_dir/screenshot.log"; then
  cat "$run_dir/screenshot.log" >&2
  echo "script errors or a crash in the screenshot run (above)" >&2
  exit 1
fi
grep -E '^(ok|FAIL|renderer|the desk|screenshot)' "$run_dir/screenshot.log"
mkdir -p "$target"
cp "$run_dir/godot-demo.png" "$target/godot-demo.png"
echo "$target/godot-demo.png, in $(($(date +%s) - shot_started)) s"

echo "-- Android arm64 (Quest headsets): the extension type-checks for aarch64-linux-android"
# No Android NDK here to link it, so this is a check, not a build.
rustup target add aarch64-linux-android >/dev/null 2>&1
cargo check --quiet -p deskwire-godot --target aarch64-linux-android
echo "aarch64-linux-android: ok"
