# Real peers for the binding suites, started from shell (source this file from bash).
#
#   source tests/peers.sh
#   peers_start_ngircd                    # sets PEERS_IRC_PORT, PEERS_IRC_ADDR (127.0.0.1:PORT)
#   peers_start_rexd_irc '#desk' deskbot --allow-from desk   # rexd --irc on that server
#   ...                                   # run a suite against "$PEERS_IRC_ADDR"
#   peers_stop_all                        # also runs on EXIT once peers_start_* was called
#
# A linked network (2 or 3 servers, irc1 the hub, the others linked to it, a star):
#   peers_start_ngircd_network 3          # PEERS_IRC_ADDRS=(127.0.0.1:P1 ...), PEERS_IRC_ADDR_1..3,
#                                         # PEERS_IRC_NAME_1..3 (irc1.deskwire.test ...); PEERS_IRC_ADDR
#                                         # is server 1's, so peers_start_rexd_irc uses it unless told
#   PEERS_IRC_ADDR=$PEERS_IRC_ADDR_2 peers_start_rexd_irc '#desk' deskbot   # rexd on server 2
#   peers_squit irc3.deskwire.test        # an operator splits the link (from the hub)
#   peers_connect irc3.deskwire.test      # and links it again (ConnectRetry = 1 does it too)
#   peers_kill_server 2; peers_restart_server 2   # SIGKILL, then the same config and port
#   peers_wait_linked                     # until every server sees all the others
#
# Everything lives under one temp dir and every process started here is stopped (SIGTERM, then
# SIGKILL after 5 s) and reaped. ngircd runs with its default flood protection, as users have it.
# REXD defaults to target/debug/rexd; set PEERS_REXD to use another build.

#
# The state is in files under PEERS_DIR (every process's pid in $PEERS_DIR/pids/, each linked
# server's config and pid in $PEERS_DIR/net-I/), so that a child given PEERS_DIR in its
# environment (PEERS_SHARED=1) may kill and restart servers too; the shell that made the
# directory stops whatever any of them started.

if [ "${PEERS_SHARED:-0}" = 1 ] && [ -n "${PEERS_DIR:-}" ]; then
  PEERS_OWNER=0
else
  PEERS_DIR=""
  PEERS_OWNER=1
fi
PEERS_PIDS=()

peers__init() {
  if [ -z "$PEERS_DIR" ]; then
    PEERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/deskwire-peers.XXXXXX")
    mkdir -p "$PEERS_DIR/pids"
    export PEERS_DIR
    peers__on_exit
  fi
}

# Stops the peers on exit, before whatever EXIT trap the caller had set: replacing that trap
# lost the caller's own clean-up (tests/dist/run.sh left 850 MB in /tmp on every run).
peers__on_exit() {
  local caller
  caller=$(trap -p EXIT)
  if [ -z "$caller" ]; then
    trap peers_stop_all EXIT
    return
  fi
  eval "set -- $caller" # trap -- 'COMMAND' EXIT
  # shellcheck disable=SC2064 # the caller's command, expanded now on purpose
  trap "peers_stop_all; $3" EXIT
}

# Records a process this file started (or a caller's: `peers_track PID`), to be stopped.
peers_track() {
  PEERS_PIDS+=("$1")
  mkdir -p "$PEERS_DIR/pids"
  : >"$PEERS_DIR/pids/$1"
}

peers__free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

peers__wait_port() {
  local port=$1 i
  for i in $(seq 1 500); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.02
  done
  echo "peers: nothing listens on 127.0.0.1:$port after 10 s" >&2
  return 1
}

# Starts a private ngircd on a free loopback port. Extra [Limits] lines may be passed as
# arguments, e.g. peers_start_ngircd 'MaxPenaltyTime = 0'.
peers_start_ngircd() {
  peers__init
  local ngircd
  ngircd=$(command -v ngircd || echo /usr/sbin/ngircd)
  local port
  port=$(peers__free_port)
  local dir="$PEERS_DIR/ngircd-$port"
  mkdir -p "$dir/conf.d"
  {
    printf '[Global]\nName = irc.deskwire.test\nInfo = deskwire test server\n'
    printf 'AdminInfo1 = deskwire\nAdminInfo2 = tests\nAdminEMail = tests@deskwire.invalid\n'
    printf 'Listen = 127.0.0.1\nPorts = %s\n' "$port"
    printf '[Limits]\nMaxConnectionsIP = 0\nPingTimeout = 120\nPongTimeout = 60\n'
    local line
    for line in "$@"; do printf '%s\n' "$line"; done
    printf '[Options]\nPAM = no\nIdent = no\nDNS = no\nIncludeDir = %s\n' "$dir/conf.d"
  } >"$dir/ngircd.conf"
  "$ngircd" -n -f "$dir/ngircd.conf" </dev/null >"$dir/log" 2>&1 &
  peers_track $!
  peers__wait_port "$port"
  PEERS_IRC_PORT=$port
  PEERS_IRC_ADDR="127.0.0.1:$port"
  export PEERS_IRC_PORT PEERS_IRC_ADDR
}

# Starts `rexd --irc "$PEERS_IRC_ADDR" --channel CHANNEL --nick NICK [ARGS...]` and waits until
# the nick is in the channel (rexd logs "joined" at info level).
peers_start_rexd_irc() {
  peers__init
  local channel=$1 nick=$2
  shift 2
  local rexd=${PEERS_REXD:-target/debug/rexd}
  local log="$PEERS_DIR/rexd-$nick.log"
  # Without --secret-file rexd refuses to serve unless told the risk is accepted: on this
  # private loopback server it is.
  case " $* " in *" --secret-file "*) ;; *) set -- "$@" --unauthenticated ;; esac
  "$rexd" --irc "$PEERS_IRC_ADDR" --channel "$channel" --nick "$nick" --log-level info "$@" \
    </dev/null >"$log" 2>&1 &
  peers_track $!
  local i
  for i in $(seq 1 500); do
    if grep -qi 'joined' "$log" 2>/dev/null; then return 0; fi
    if ! kill -0 "${PEERS_PIDS[-1]}" 2>/dev/null; then
      echo "peers: rexd --irc exited:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.02
  done
  echo "peers: rexd --irc did not join $channel within 10 s:" >&2
  cat "$log" >&2
  return 1
}

peers_stop_all() {
  # A shell sharing another's PEERS_DIR leaves the stopping to that one.
  [ "$PEERS_OWNER" = 1 ] || return 0
  local pid i pids=("${PEERS_PIDS[@]}")
  if [ -n "$PEERS_DIR" ] && [ -d "$PEERS_DIR/pids" ]; then
    for pid in "$PEERS_DIR"/pids/*; do
      [ -e "$pid" ] && pids+=("${pid##*/}")
    done
  fi
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for i in $(seq 1 250); do
      kill -0 "$pid" 2>/dev/null || break
      # A child of another shell is not ours to reap: gone once it is a zombie of nobody's.
      [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ] && break
      sleep 0.02
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PEERS_PIDS=()
  if [ -n "$PEERS_DIR" ]; then rm -rf "$PEERS_DIR"; fi
  PEERS_DIR=""
}

# --- a linked network ---------------------------------------------------------------------

PEERS_IRC_ADDRS=()
PEERS_NET_OPER_NAME=op
PEERS_NET_OPER_PASSWORD=oppass

# Starts N (2 or 3) ngircd servers on free loopback ports, linked in a star: irc1.deskwire.test
# is the hub, and each other server connects out to it (exactly one side of a link may, or
# both refuse it) and connects again 1 s after a split (ConnectRetry = 1). Each has an
# operator, op / oppass, who may SQUIT and CONNECT. Returns once every server sees the others.
# Extra [Limits] lines may follow N, as for peers_start_ngircd.
peers_start_ngircd_network() {
  local n=$1
  shift
  case "$n" in 2 | 3) ;; *) echo "peers: a network of 2 or 3 servers, not '$n'" >&2; return 1 ;; esac
  peers__init
  local ngircd i port line
  ngircd=$(command -v ngircd || echo /usr/sbin/ngircd)
  local ports=()
  for i in $(seq 1 "$n"); do ports+=("$(peers__free_port)"); done
  PEERS_IRC_ADDRS=()
  for i in $(seq 1 "$n"); do
    port=${ports[$((i - 1))]}
    local dir="$PEERS_DIR/net-$i"
    mkdir -p "$dir/conf.d"
    {
      printf '[Global]\nName = irc%s.deskwire.test\nInfo = deskwire test server %s\n' "$i" "$i"
      printf 'AdminInfo1 = deskwire\nAdminInfo2 = tests\nAdminEMail = tests@deskwire.invalid\n'
      printf 'Listen = 127.0.0.1\nPorts = %s\n' "$port"
      printf '[Limits]\nMaxConnectionsIP = 0\nPingTimeout = 120\nPongTimeout = 60\nConnectRetry = 1\n'
      for line in "$@"; do printf '%s\n' "$line"; done
      printf '[Options]\nPAM = no\nIdent = no\nDNS = no\nIncludeDir = %s\n' "$dir/conf.d"
      printf '[Operator]\nName = %s\nPassword = %s\n' "$PEERS_NET_OPER_NAME" "$PEERS_NET_OPER_PASSWORD"
      if [ "$i" = 1 ]; then
        local j
        for j in $(seq 2 "$n"); do
          # The hub waits for the leaves.
          printf '[Server]\nName = irc%s.deskwire.test\nHost = 127.0.0.1\nPort = %s\n' "$j" "${ports[$((j - 1))]}"
          printf 'MyPassword = link1%s\nPeerPassword = link%s1\nPassive = yes\n' "$j" "$j"
        done
      else
        printf '[Server]\nName = irc1.deskwire.test\nHost = 127.0.0.1\nPort = %s\n' "${ports[0]}"
        printf 'MyPassword = link%s1\nPeerPassword = link1%s\nPassive = no\n' "$i" "$i"
      fi
    } >"$dir/ngircd.conf"
    echo "$port" >"$dir/port"
    peers__start_net_server "$i" || return 1
    PEERS_IRC_ADDRS+=("127.0.0.1:$port")
    export "PEERS_IRC_ADDR_$i=127.0.0.1:$port" "PEERS_IRC_PORT_$i=$port" "PEERS_IRC_NAME_$i=irc$i.deskwire.test"
  done
  PEERS_IRC_PORT=${ports[0]}
  PEERS_IRC_ADDR="127.0.0.1:${ports[0]}"
  PEERS_NET_SIZE=$n
  export PEERS_IRC_PORT PEERS_IRC_ADDR PEERS_NET_SIZE
  peers_wait_linked
}

peers__start_net_server() {
  local i=$1 dir="$PEERS_DIR/net-$1" ngircd
  ngircd=$(command -v ngircd || echo /usr/sbin/ngircd)
  "$ngircd" -n -f "$dir/ngircd.conf" </dev/null >>"$dir/log" 2>&1 &
  echo $! >"$dir/pid"
  peers_track $!
  # Killed on purpose (peers_kill_server, maybe from another shell): no "Killed" job notice.
  disown $!
  peers__wait_port "$(cat "$dir/port")"
}

# Sends IRC lines to server I as an operator and prints what the server answered within
# WAIT seconds: peers__oper I WAIT 'SQUIT irc2.deskwire.test :test split' ...
peers__oper() {
  local i=$1 wait=$2
  shift 2
  python3 - "$(cat "$PEERS_DIR/net-$i/port")" "$wait" "$PEERS_NET_OPER_NAME" "$PEERS_NET_OPER_PASSWORD" "$@" <<'PY'
import os, socket, sys, time
port, wait, name, password, lines = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
nick = "peersop%d" % (os.getpid() % 100)
s.sendall(("NICK %s\r\nUSER op 0 * :peers operator\r\n" % nick).encode())
got = b""
while b" 001 " not in got:
    chunk = s.recv(4096)
    if not chunk:
        sys.exit("peers: the server closed before registering: %r" % got[-300:])
    got += chunk
s.sendall(("OPER %s %s\r\n" % (name, password)).encode())
while b" 381 " not in got:
    chunk = s.recv(4096)
    if not chunk or b" 464 " in got or b" 491 " in got:
        sys.exit("peers: OPER refused: %r" % got[-300:])
    got += chunk
got = b""
for line in lines:
    s.sendall((line + "\r\n").encode())
end = time.monotonic() + wait
s.settimeout(0.1)
while time.monotonic() < end:
    try:
        chunk = s.recv(4096)
    except socket.timeout:
        continue
    if not chunk:
        break
    got += chunk
s.sendall(b"QUIT :done\r\n")
s.close()
sys.stdout.write(got.decode("utf-8", "replace"))
PY
}

# The names of the servers server I sees (itself included), one a line.
peers_links() {
  peers__oper "${1:-1}" 0.3 LINKS | awk '$2 == "364" { print $4 }' | sort
}

# Waits (up to 20 s) until every running server sees all N.
peers_wait_linked() {
  local n=${PEERS_NET_SIZE:-${#PEERS_IRC_ADDRS[@]}} i k all
  for k in $(seq 1 100); do
    all=1
    for i in $(seq 1 "$n"); do
      [ "$(peers_links "$i" | wc -l)" = "$n" ] || { all=0; break; }
    done
    [ "$all" = 1 ] && return 0
    sleep 0.2
  done
  echo "peers: the servers are not all linked after 20 s" >&2
  for i in $(seq 1 "$n"); do echo "irc$i sees: $(peers_links "$i" | tr '\n' ' ')" >&2; done
  return 1
}

# An operator on the hub splits the link to server NAME (irc2.deskwire.test); the server
# links again by itself about 1-3 s later (ConnectRetry), or at once with peers_connect.
peers_squit() {
  peers__oper 1 0.2 "SQUIT $1 :peers_squit" >/dev/null
}

# An operator on the hub asks it to link server NAME now. The leaf connects out to the hub,
# so the hub's CONNECT may find nothing to do: ask the leaf too.
peers_connect() {
  local name=$1 i
  for i in $(seq 2 "${PEERS_NET_SIZE:-3}"); do
    if [ "irc$i.deskwire.test" = "$name" ] && [ -f "$PEERS_DIR/net-$i/port" ]; then
      peers__oper "$i" 0.2 "CONNECT irc1.deskwire.test" >/dev/null || true
    fi
  done
  peers__oper 1 0.2 "CONNECT $name" >/dev/null || true
}

# Kills server I (SIGKILL: no QUIT, no SQUIT sent; its clients' sockets close) and waits for it.
peers_kill_server() {
  local dir="$PEERS_DIR/net-$1" pid k
  pid=$(cat "$dir/pid")
  kill -9 "$pid" 2>/dev/null || true
  for k in $(seq 1 250); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ] && break
    sleep 0.02
  done
  wait "$pid" 2>/dev/null || true
  rm -f "$PEERS_DIR/pids/$pid"
}

# Starts server I again, from its config, on its port (the leaves link again by themselves).
peers_restart_server() {
  peers__start_net_server "$1"
}
