# Real peers for the binding suites, started from shell (source this file from bash).
#
#   source tests/peers.sh
#   peers_start_ngircd                    # sets PEERS_IRC_PORT, PEERS_IRC_ADDR (127.0.0.1:PORT)
#   peers_start_rexd_irc '#desk' deskbot --allow-from desk   # rexd --irc on that server
#   ...                                   # run a suite against "$PEERS_IRC_ADDR"
#   peers_stop_all                        # also runs on EXIT once peers_start_* was called
#
# Everything lives under one temp dir and every process started here is stopped (SIGTERM, then
# SIGKILL after 5 s) and reaped. ngircd runs with its default flood protection, as users have it.
# REXD defaults to target/debug/rexd; set PEERS_REXD to use another build.

PEERS_DIR=""
PEERS_PIDS=()

peers__init() {
  if [ -z "$PEERS_DIR" ]; then
    PEERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/deskwire-peers.XXXXXX")
    trap peers_stop_all EXIT
  fi
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
  PEERS_PIDS+=($!)
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
  PEERS_PIDS+=($!)
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
  local pid i
  for pid in "${PEERS_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PEERS_PIDS[@]}"; do
    for i in $(seq 1 250); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.02
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PEERS_PIDS=()
  if [ -n "$PEERS_DIR" ]; then rm -rf "$PEERS_DIR"; fi
  PEERS_DIR=""
}
