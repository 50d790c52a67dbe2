#!/usr/bin/env bash
# Proxy overhead benchmark: starts the mock upstream, floor-b, reef and (optionally) LiteLLM on free
# 127.0.0.1 ports, runs bench/proxy_overhead.py against them, stops every process by PID, writes
# bench/results/<time>-<mode>.json and prints the markdown table.
#
#   bench/run.sh [--quick] [--no-litellm] [--soak-s N] [--no-pin] [--baseline REF] [--otel] [--pass-through]
#
# --quick       a smoke run of a few minutes (fewer rounds, 15 s soak)
# --no-litellm  skip LiteLLM (it is also skipped, with a warning, when its install fails)
# --soak-s N    soak length in seconds (default 300; 15 with --quick)
# --no-pin      do not pin: by default, on 2+ CPUs, the mock and the client run on CPU0, every proxy on CPU1
# --baseline REF  also run reef as it is at commit REF (a temporary worktree, the same venv) as a fourth
#               target in the same interleaved run, and print reef's ratios against it
# --otel        also run a second reef exporting OpenTelemetry spans to a local OTLP/HTTP sink (bench/otlp_sink.py)
#               as the target reef+otel in the same interleaved run: export on vs off; and reef+busy, reef with a
#               lowest-priority busy loop on the client's core (where the export process runs): the control for
#               work on that core
# --pass-through  also run a reef with inference.client-auth pass (reef's token in x-reef-token, the client's own
#               key forwarded upstream) as the target reef+pass, beside reef+token (the same REEF_TOKEN sent as the
#               client's bearer, the default): the client's key passed vs reef's token checked
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

quick=0 litellm=1 pin=1 soak_s="" baseline="" otel=0 pass_through=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-litellm) litellm=0 ;;
    --no-pin) pin=0 ;;
    --soak-s) soak_s="$2"; shift ;;
    --baseline) baseline="$2"; shift ;;
    --otel) otel=1 ;;
    --pass-through) pass_through=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "[run.sh] $*" >&2; }

reef_py="$root/.venv/bin/python"
[ -x "$root/.venv/bin/reef" ] || { say "no .venv/bin/reef: install reef first (see README.md)"; exit 1; }

# The client and the mock: uvloop + httptools in their own small venv.
"$here/bench_venv.sh" >/dev/null
bench_venv="$here/.venv-bench"

litellm_venv="$here/.venv-litellm"
if [ "$litellm" = 1 ] && ! [ -x "$litellm_venv/bin/litellm" ]; then
  say "creating $litellm_venv (pip install 'litellm[proxy]'; takes a few minutes)"
  if ! { python3 -m venv "$litellm_venv" && "$litellm_venv/bin/pip" install -q 'litellm[proxy]'; }; then
    say "WARNING: LiteLLM could not be installed; running without it"
    litellm=0
  fi
fi

# Free ports, chosen by the kernel.
read -r p_mock p_floor p_reef p_litellm p_base p_otel p_sink p_pass p_token < <("$bench_venv/bin/python" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(9)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()
EOF
)

work=$(mktemp -d /tmp/reef-bench.XXXXXX)
pids=()
stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then say "pid $pid did not stop on TERM; killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
  done
  if [ -n "$baseline" ]; then git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap stop_all EXIT

client_cpu="" proxy_cpu=""
if [ "$pin" = 1 ] && [ "$(nproc)" -ge 2 ]; then
  client_cpu="taskset -c 0" proxy_cpu="taskset -c 1"
else
  pin=0
fi

$client_cpu "$bench_venv/bin/python" "$here/mock_upstream.py" --port "$p_mock" >"$work/mock.log" 2>&1 &
pid_mock=$!; pids+=("$pid_mock")
$proxy_cpu "$reef_py" "$here/floor_proxy.py" --port "$p_floor" --upstream "http://127.0.0.1:$p_mock" \
  --record "$work/floor.sqlite3" >"$work/floor.log" 2>&1 &
pid_floor=$!; pids+=("$pid_floor")
$proxy_cpu "$root/.venv/bin/reef" serve --inference.upstream-url "http://127.0.0.1:$p_mock" \
  --reef.port "$p_reef" --reef.state-dir "$work/reef" >"$work/reef.log" 2>&1 &
pid_reef=$!; pids+=("$pid_reef")
if [ "$litellm" = 1 ]; then
  BENCH_MOCK_API_BASE="http://127.0.0.1:$p_mock/v1" \
  LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY=true LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR \
    $proxy_cpu "$litellm_venv/bin/litellm" --config "$here/litellm_config.yaml" --host 127.0.0.1 \
    --port "$p_litellm" --num_workers 1 >"$work/litellm.log" 2>&1 &
  pid_litellm=$!; pids+=("$pid_litellm")
fi

otel_arg=()
if [ "$otel" = 1 ]; then
  $client_cpu "$reef_py" "$here/otlp_sink.py" --port "$p_sink" >"$work/sink.log" 2>&1 &
  pids+=($!)
  $proxy_cpu "$root/.venv/bin/reef" serve --inference.upstream-url "http://127.0.0.1:$p_mock" \
    --reef.port "$p_otel" --reef.state-dir "$work/reef-otel" --telemetry.otlp-endpoint "http://127.0.0.1:$p_sink" \
    >"$work/otel.log" 2>&1 &
  pid_otel=$!; pids+=("$pid_otel")
  otel_arg=(--otel "$p_otel:$pid_otel")
fi

pass_arg=()
if [ "$pass_through" = 1 ]; then
  REEF_TOKEN=bench-reef-token $proxy_cpu "$root/.venv/bin/reef" serve --inference.upstream-url "http://127.0.0.1:$p_mock" \
    --reef.port "$p_pass" --reef.state-dir "$work/reef-pass" --inference.client-auth pass >"$work/pass.log" 2>&1 &
  pid_pass=$!; pids+=("$pid_pass")
  # The same token, checked the default way (the client sends it as its bearer): what passing the key is compared to.
  REEF_TOKEN=bench-reef-token $proxy_cpu "$root/.venv/bin/reef" serve --inference.upstream-url "http://127.0.0.1:$p_mock" \
    --reef.port "$p_token" --reef.state-dir "$work/reef-token" >"$work/token.log" 2>&1 &
  pid_token=$!; pids+=("$pid_token")
  pass_arg=(--pass-through "$p_pass:$pid_pass" --token "$p_token:$pid_token")
fi

base_arg=()
if [ -n "$baseline" ]; then
  base_commit=$(git -C "$root" rev-parse --short "$baseline^{commit}") || { say "--baseline $baseline: not a commit"; exit 2; }
  git -C "$root" worktree add -q --detach "$work/base" "$base_commit"
  # The worktree's packages come first on the path, ahead of the editable install of this checkout; -P keeps
  # the working directory (this checkout) off the front of the path, where `python -c` would put it.
  base_py=(env PYTHONPATH="$work/base" "$reef_py" -P)
  "${base_py[@]}" -c 'import sys, reef_daemon; sys.exit(not reef_daemon.__file__.startswith(sys.argv[1]))' "$work/base/" \
    || { say "--baseline: the worktree's reef_daemon is not the one imported"; exit 1; }
  $proxy_cpu "${base_py[@]}" -c 'import sys; from reef_cli.app import main; sys.argv[0] = "reef"; main()' \
    serve --inference.upstream-url "http://127.0.0.1:$p_mock" --reef.port "$p_base" --reef.state-dir "$work/reef-base" \
    >"$work/base.log" 2>&1 &
  pid_base=$!; pids+=("$pid_base")
  base_arg=(--baseline "$p_base:$pid_base" --meta "baseline_commit=$base_commit")
fi

# Wait (bounded) until each answers a real request.
ready() {  # name port pid log [one more request header]
  local i extra=()
  if [ -n "${5:-}" ]; then extra=(-H "$5"); fi
  for i in $(seq 1 240); do
    if ! kill -0 "$3" 2>/dev/null; then say "$1 exited; its log:"; cat "$4" >&2; return 1; fi
    if curl -sf -m 5 -o /dev/null -H 'content-type: application/json' -H 'x-reef-scenario: bench' "${extra[@]}" \
      -d '{"model":"mock","messages":[{"role":"user","content":"hi"}]}' \
      "http://127.0.0.1:$2/v1/chat/completions"; then
      return 0
    fi
    sleep 0.5
  done
  say "$1 did not answer within 2 minutes; its log:"; cat "$4" >&2; return 1
}
ready mock "$p_mock" "$pid_mock" "$work/mock.log"
ready floor-b "$p_floor" "$pid_floor" "$work/floor.log"
ready reef "$p_reef" "$pid_reef" "$work/reef.log"
if [ -n "$baseline" ]; then ready "reef at $baseline" "$p_base" "$pid_base" "$work/base.log"; fi
exporter_pid=""
if [ "$otel" = 1 ]; then
  ready "reef exporting spans" "$p_otel" "$pid_otel" "$work/otel.log"
  # reef exports from a process of its own; on a machine with a spare core that is where it runs. Here the spare
  # core is the client's and the mock's (CPU0), so that is where it goes, all its threads (-a: the SDK's export
  # thread already runs, and would otherwise stay on reef's core).
  exporter_pid=$(pgrep -P "$pid_otel" -f reef_daemon.telemetry.exporter | head -1)
  if [ "$pin" = 1 ] && [ -n "$exporter_pid" ] && [ -n "$client_cpu" ]; then taskset -a -pc 0 "$exporter_pid" >/dev/null; fi
fi
if [ "$pass_through" = 1 ]; then ready "reef passing the client's key" "$p_pass" "$pid_pass" "$work/pass.log" \
  "x-reef-token: bench-reef-token"; ready "reef checking its token" "$p_token" "$pid_token" "$work/token.log" \
  "Authorization: Bearer bench-reef-token"; fi
litellm_arg=()
if [ "$litellm" = 1 ]; then
  if ready litellm "$p_litellm" "$pid_litellm" "$work/litellm.log"; then
    litellm_arg=(--litellm "$p_litellm:$pid_litellm")
  else
    say "WARNING: LiteLLM did not start; running without it"
  fi
fi

version() { "$1" -c "import importlib.metadata as m; print(m.version('$2'))" 2>/dev/null || echo "?"; }
meta=(
  --meta "reef_commit=$(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- reef_daemon 2>/dev/null || echo +dirty)"
  --meta "reef_python=$("$reef_py" -c 'import platform; print(platform.python_version())')"
  --meta "aiohttp=$(version "$reef_py" aiohttp)"
  --meta "uvloop=$(version "$reef_py" uvloop)"
  --meta "sqlite=$("$reef_py" -c 'import sqlite3; print(sqlite3.sqlite_version)')"
  --meta "pinned=$pin"
)
if [ ${#litellm_arg[@]} -gt 0 ]; then
  meta+=(--meta "litellm=$(version "$litellm_venv/bin/python" litellm)")
  meta+=(--meta "uvicorn=$(version "$litellm_venv/bin/python" uvicorn)")
fi

mode=full; [ "$quick" = 1 ] && mode=quick
out="$here/results/$(date +%Y%m%d-%H%M%S)-$mode.json"
driver=("$bench_venv/bin/python" "$here/proxy_overhead.py" --direct "$p_mock" --floor "$p_floor:$pid_floor"
  --reef "$p_reef:$pid_reef" "${litellm_arg[@]}" "${base_arg[@]}" "${otel_arg[@]}" "${pass_arg[@]}" --mock-pid "$pid_mock" --out "$out" "${meta[@]}")
[ "$quick" = 1 ] && driver+=(--quick)
[ -n "$soak_s" ] && driver+=(--soak-s "$soak_s")
soak_int=${soak_s:-300}; limit=$(( quick ? 900 : 2400 )); limit=$(( limit + ${soak_int%.*} ))
say "driver: ${driver[*]}"
# shellcheck disable=SC2086
timeout "$limit" $client_cpu "${driver[@]}"
if [ -n "$exporter_pid" ] && [ -r "/proc/$exporter_pid/stat" ]; then
  ticks=$(awk '{print $14 + $15}' "/proc/$exporter_pid/stat")
  spans=$(curl -sf "http://127.0.0.1:$p_sink/spans" | "$reef_py" -c 'import json, sys; print(json.load(sys.stdin)["spans"])')
  "$reef_py" -c "import os; t, n = $ticks / os.sysconf('SC_CLK_TCK'), $spans; print(f'The export process (not in the proxy CPU above): {t:.1f} s CPU for {n:,} spans the sink took, {t / max(n, 1) * 1e6:.0f} µs a span.')"
fi
