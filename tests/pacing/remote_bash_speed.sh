#!/usr/bin/env bash
# How long RemoteBash takes through a real ngircd with its flood protection on, by kind of
# output, size and mode, side by side in one run:
#   v40       - what the defaults were before deskwire's extensions were on: the spec's plain
#               frames of 240 bytes, 3 lines and then one a second (rexd and desk both told so)
#   defaults  - the defaults now: compressed answers, adaptive payloads, and the pacing rexd
#               takes from what the server says it is (ngircd: groups of 3 lines every 1.1 s)
# Each run is `desk --role client` against an `rexd --irc` that is already in the channel; the
# time is the desk process's wall time (registration and join included, about a second on
# ngircd, which delays a new client's JOIN). Not a test: it prints a table, nothing is asserted.
# The last column is what that rate would carry within RemoteBash's default 30 s timeout.
#
#   bash tests/pacing/remote_bash_speed.sh [SIZES...]      default: 16384 65536
#   MODES="v40 defaults" KINDS="build-log ls-usr-bin source" bash tests/pacing/...
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/peers.sh
sizes=("${@:-16384 65536}")
read -r -a sizes <<<"${sizes[*]}"
read -r -a modes <<<"${MODES:-v40 defaults}"
read -r -a kinds <<<"${KINDS:-build-log ls-usr-bin source}"

cargo build --quiet -p rexd -p deskwire-desk
corpus=$(mktemp -d)
trap 'peers_stop_all; rm -rf "$corpus"' EXIT
# Three kinds of output a model asks for, the same bytes for every mode: a verbose cargo build
# of a few crates, `ls -la /usr/bin`, and 2,000 lines of Rust source.
cargo build -vv -p serde_json -p tempfile -p memchr -p base64 -p flate2 \
  --target-dir "$corpus/target" >"$corpus/build-log.txt" 2>&1
ls -la /usr/bin >"$corpus/ls-usr-bin.txt"
cat core/src/oa1/*.rs | sed -n 1,2000p >"$corpus/source.txt"

peers_start_ngircd
printf '%-10s %-8s %-9s %8s %7s %12s\n' output bytes mode seconds frames 'KB in 30 s'
for mode in "${modes[@]}"; do
  case $mode in
    v40)
      rexd_flags=(--no-compression --no-adaptive --pacing-burst 3 --pacing-interval-ms 1000)
      desk_flags=(--no-compression --no-adaptive) ;;
    defaults) rexd_flags=(); desk_flags=() ;;
    *) echo "unknown mode $mode (v40, defaults)" >&2; exit 2 ;;
  esac
  nick="rx${mode:0:4}"
  peers_start_rexd_irc '#speed' "$nick" --allow-from desk --timeout-sec 900 "${rexd_flags[@]}"
  for kind in "${kinds[@]}"; do
    for size in "${sizes[@]}"; do
      start=$(date +%s%N)
      out=$(target/debug/desk --irc "$PEERS_IRC_ADDR" --channel '#speed' --role client \
        --remote-nick "$nick" --timeout-sec 1000 "${desk_flags[@]}" \
        "head -c $size $corpus/$kind.txt" 2>"$corpus/stats")
      end=$(date +%s%N)
      got=$(printf '%s' "$out" | wc -c)
      if [ "$got" -lt $((size - 1)) ]; then
        echo "short answer for $kind $size $mode: $got bytes" >&2
        exit 1
      fi
      frames=$(sed -n 's/.*frames out [0-9]* in \([0-9]*\).*/\1/p' "$corpus/stats")
      ms=$(((end - start) / 1000000))
      printf '%-10s %-8s %-9s %8.1f %7s %12.1f\n' "$kind" "$size" "$mode" \
        "$(echo "$ms / 1000" | bc -l)" "$frames" "$(echo "$size / $ms * 30 / 1.024" | bc -l)"
      echo "$kind $size $mode $ms" >>"$corpus/results"
    done
  done
  kill "${PEERS_PIDS[-1]}"
  wait "${PEERS_PIDS[-1]}" 2>/dev/null || true
  unset 'PEERS_PIDS[-1]'
done
if [[ " ${modes[*]} " == *" v40 "* && " ${modes[*]} " == *" defaults "* ]]; then
  echo
  echo "v40 time / defaults time:"
  awk '{ t[$1" "$2" "$3] = $4 } END {
    for (k in t) { split(k, p, " "); if (p[3] == "defaults") {
      printf "  %-10s %6s  %.2fx faster\n", p[1], p[2], t[p[1]" "p[2]" v40"] / t[k] } } }' \
    "$corpus/results" | sort
fi
