#!/usr/bin/env bash
# `rex exec` against plain ssh, as a user runs them: whole processes, output to /dev/null, in
# turns, over a private sshd on loopback. Prints the median wall time of each contender and
# its ratio to ssh's (above 1 is faster than ssh).
#
#   rexd/benches/rex_vs_ssh.sh [ROUNDS] [COMMAND...]
#
# Defaults: 7 rounds of `seq 1 20000000`. The contenders are `ssh host CMD`, `ssh host 'CMD' |
# cat` (ssh with one more process on its way), `ssh host 'CMD | cat' | cat` (one more on each
# side, as rex's path has: rexd on the server, rex on the client), the same with a relay that
# splices instead of cat (`splice_relay.c` beside this script, built here with cc when there is
# one: what the extra processes cost when they copy nothing), and `rex exec -- sh -c CMD`
# with the release build of this checkout (`cargo build --release -p rexd`). Set BEFORE_REX
# and BEFORE_REXD to the binaries of another build to time it in the same turns ("before").
set -euo pipefail

rounds=${1:-7}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS] [COMMAND...]" >&2; exit 2; }
shift || true
cmd=${*:-seq 1 20000000}
repo=$(cd "$(dirname "$0")/../.." && pwd)
rex=$repo/target/release/rex
rexd=$repo/target/release/rexd
for bin in "$rex" "$rexd"; do
    [ -x "$bin" ] || { echo "$bin is missing: cargo build --release -p rexd" >&2; exit 2; }
done
sshd=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd" ] || { echo "sshd is missing (apt-get install openssh-server)" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/rex-vs-ssh.XXXXXX")
cleanup() {
    [ -f "$dir/sshd.pid" ] && kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$dir/host"
ssh-keygen -q -t ed25519 -N '' -f "$dir/client"
cp "$dir/client.pub" "$dir/authorized_keys"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
LogLevel ERROR
EOF
"$sshd" -f "$dir/sshd_config" -E "$dir/sshd.log"
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
done

relay=
if command -v cc >/dev/null; then
    cc -O2 -o "$dir/splice_relay" "$repo/rexd/benches/splice_relay.c" && relay=$dir/splice_relay
fi

ssh_opts=(-p "$port" -F none -i "$dir/client" -o IdentitiesOnly=yes -o BatchMode=yes
    -o "UserKnownHostsFile=$dir/known_hosts" -o StrictHostKeyChecking=no -o LogLevel=ERROR)
host="$(id -un)@127.0.0.1"
targets=$dir/targets.toml
add_target() { # NAME REXD
    local args=()
    for o in "${ssh_opts[@]}"; do args+=("--ssh-arg=$o"); done
    "$rex" --targets-file "$targets" target add "$1" "ssh://$host" --rexd "$2" "${args[@]}" >/dev/null
}
add_target after "$rexd"
if [ -n "${BEFORE_REX:-}" ]; then
    add_target before "${BEFORE_REXD:?set BEFORE_REXD too}"
fi

seconds() { # runs "$@" to /dev/null, prints its wall time
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null
    end=$(date +%s.%N)
    awk "BEGIN { print $end - $start }"
}

echo "$rounds rounds in turns of: $cmd"
for _ in $(seq "$rounds"); do
    echo "ssh $(seconds ssh "${ssh_opts[@]}" "$host" "$cmd")"
    echo "ssh|cat $(seconds sh -c 'ssh "$@" | cat' sh "${ssh_opts[@]}" "$host" "$cmd")"
    echo "ssh+2cat $(seconds sh -c 'ssh "$@" | cat' sh "${ssh_opts[@]}" "$host" "$cmd | cat")"
    if [ -n "$relay" ]; then
        echo "ssh+2splice $(seconds sh -c 'r=$1; shift; ssh "$@" | "$r"' sh "$relay" "${ssh_opts[@]}" \
            "$host" "$cmd | $relay")"
    fi
    if [ -n "${BEFORE_REX:-}" ]; then
        echo "rex(before) $(seconds "$BEFORE_REX" --targets-file "$targets" -t before exec -- sh -c "$cmd")"
    fi
    echo "rex $(seconds "$rex" --targets-file "$targets" -t after exec -- sh -c "$cmd")"
done | sort -k1,1 -k2,2n | awk '
    { times[$1] = times[$1] " " $2; n[$1]++ }
    END {
        for (k in times) { split(times[k], t, " "); median[k] = t[int((n[k] + 1) / 2)] }
        for (k in median) printf "  %-12s %.3f s (%.2fx)\n", k, median[k], median["ssh"] / median[k]
    }'
