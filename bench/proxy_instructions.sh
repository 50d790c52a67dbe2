#!/usr/bin/env bash
# Instructions per answer of a proxy, counted by callgrind: a figure machine load does not move.
#
#   bench/proxy_instructions.sh reef [CODE_DIR]   # reef (this checkout, or the packages of CODE_DIR first)
#   bench/proxy_instructions.sh floor             # floor-b
#
# Starts the mock, runs the proxy under `valgrind --tool=callgrind`, sends 200 + 100 warm-up answers, zeroes the
# counters, then counts N (default 300) non-stream and N stream answers at c=C (default 8) from
# bench/count_load.py. Prints the user-space instructions of every thread of the proxy per answer (the kernel's
# work is not counted).
# Takes ~5 minutes on 2 cores. Needs valgrind; bench_venv.sh makes bench/.venv-bench if missing.
# KEEP=DIR keeps the two dumps (DIR/stream0.cg, DIR/stream1.cg) for callgrind_annotate.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/.." && pwd)
target=${1:?reef or floor}; code=${2:-$root}; n=${N:-300}; c=${C:-8}
bv=$("$here/bench_venv.sh")
work=$(mktemp -d /tmp/reef-instructions.XXXXXX)
read -r p_mock p_proxy < <("$bv" -c "
import socket
s = [socket.socket() for _ in range(2)]
[x.bind(('127.0.0.1', 0)) for x in s]
print(*(x.getsockname()[1] for x in s))")
"$bv" "$here/mock_upstream.py" --port "$p_mock" >"$work/mock.log" 2>&1 &
pid_mock=$!
if [ "$target" = floor ]; then
  proxy=("$here/floor_proxy.py" --port "$p_proxy" --upstream "http://127.0.0.1:$p_mock" --record "$work/floor.sqlite3")
else
  proxy=(-c 'import sys; from reef_cli.app import main; sys.argv[0] = "reef"; main()' serve
    --inference.upstream-url "http://127.0.0.1:$p_mock" --reef.port "$p_proxy" --reef.state-dir "$work/reef")
fi
(cd "$code" && PYTHONPATH="$code" exec valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
  "$root/.venv/bin/python" "${proxy[@]}" >"$work/proxy.log" 2>&1) &
pid_proxy=$!
trap 'kill "$pid_mock" "$pid_proxy" 2>/dev/null || true; sleep 2; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do
  if curl -sf -m 30 -o /dev/null -H 'content-type: application/json' -H 'x-reef-scenario: bench' \
    -d '{"model":"mock","messages":[{"role":"user","content":"hi"}]}' "http://127.0.0.1:$p_proxy/v1/chat/completions"; then
    break
  fi
  sleep 1
done
"$bv" "$here/count_load.py" "$p_proxy" 200 0 "$c" >/dev/null
"$bv" "$here/count_load.py" "$p_proxy" 100 1 "$c" >/dev/null
for stream in 0 1; do
  callgrind_control -z "$pid_proxy" >/dev/null 2>&1
  answers=$("$bv" "$here/count_load.py" "$p_proxy" "$n" "$stream" "$c")
  callgrind_control -d "$pid_proxy" >/dev/null 2>&1
  sleep 1
  dump=$(ls -t "$work"/cg.out* | head -1)
  total=$(grep -E "^(summary|totals):" "$dump" | head -1 | awk '{print $2}')
  echo "$target stream=$stream answers=$answers instructions/answer=$(( total / answers ))"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$dump" "$KEEP/stream$stream.cg"; fi
done
