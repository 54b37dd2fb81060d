#!/usr/bin/env bash
# How long RemoteBash takes through a real ngircd with its flood protection on and deskwire's
# default pacing (3 lines, then one a second), by answer size, kind of output and mode:
#   readable  - the v40 frames, 240-byte payloads
#   adaptive  - v40 frames, the largest payload that fits each line
#   compressed - the desk offers compression (ACCEPT), rexd answers RESZ, adaptive payloads
# Each run is `desk --role client` against an `rexd --irc` that is already in the channel; the
# time is the desk process's wall time (registration and join included, about a second on
# ngircd, which delays a new client's JOIN). Not a test: it prints a table, nothing is asserted.
#
#   bash tests/pacing/remote_bash_speed.sh [SIZES...]      default: 16384 65536
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/peers.sh
sizes=("${@:-16384 65536}")
read -r -a sizes <<<"${sizes[*]}"

cargo build --quiet -p rexd -p deskwire-desk
corpus=$(mktemp -d)
trap 'peers_stop_all; rm -rf "$corpus"' EXIT
# Three kinds of typical output, the same bytes for every mode.
ls -la /usr/bin /usr/lib/x86_64-linux-gnu /usr/share/doc >"$corpus/ls-la.txt" 2>/dev/null || true
cat /var/log/dpkg.log /var/log/apt/term.log /var/log/alternatives.log >"$corpus/log.txt" 2>/dev/null || true
cat core/src/oa1/*.rs core/src/irc/*.rs >"$corpus/source.txt"

peers_start_ngircd
printf '%-10s %-8s %-11s %8s %7s\n' output bytes mode seconds frames
for mode in readable adaptive compressed; do
  case $mode in
    readable) rexd_flags=(--no-compression --no-adaptive); desk_flags=(--no-compression --no-adaptive) ;;
    adaptive) rexd_flags=(--no-compression); desk_flags=(--no-compression) ;;
    compressed) rexd_flags=(); desk_flags=() ;;
  esac
  nick="rx${mode:0:4}"
  peers_start_rexd_irc '#speed' "$nick" --allow-from desk --timeout-sec 900 "${rexd_flags[@]}"
  for kind in ls-la log source; do
    for size in "${sizes[@]}"; do
      start=$(date +%s%N)
      out=$(target/debug/desk --irc "$PEERS_IRC_ADDR" --channel '#speed' --role client \
        --remote-nick "$nick" --timeout-sec 1000 "${desk_flags[@]}" \
        "head -c $size $corpus/$kind.txt" 2>"$corpus/stats")
      end=$(date +%s%N)
      if [ "$(printf '%s' "$out" | wc -c)" -lt $((size - 1)) ]; then
        echo "short answer for $kind $size $mode: $(printf '%s' "$out" | wc -c) bytes" >&2
        exit 1
      fi
      frames=$(sed -n 's/.*frames out [0-9]* in \([0-9]*\).*/\1/p' "$corpus/stats")
      ms=$(((end - start) / 1000000))
      printf '%-10s %-8s %-11s %8.1f %7s\n' "$kind" "$size" "$mode" "$(echo "$ms / 1000" | bc -l)" "$frames"
      echo "$kind $size $mode $ms" >>"$corpus/results"
    done
  done
  kill "${PEERS_PIDS[-1]}"
  wait "${PEERS_PIDS[-1]}" 2>/dev/null || true
  unset 'PEERS_PIDS[-1]'
done
echo
echo "compressed / adaptive time:"
awk '{ t[$1" "$2" "$3] = $4 } END {
  for (k in t) { split(k, p, " "); if (p[3] == "adaptive") {
    c = t[p[1]" "p[2]" compressed"]; r = t[p[1]" "p[2]" readable"];
    printf "  %-8s %6s  adaptive/compressed %.2fx faster, readable/compressed %.2fx\n", p[1], p[2], t[k] / c, r / c } } }' \
  "$corpus/results" | sort
