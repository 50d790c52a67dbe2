#!/usr/bin/env bash
# Makes bench/.venv-bench (uvloop + httptools, for the mock and the client) when it is missing; prints its python.
set -euo pipefail
venv="$(cd "$(dirname "$0")" && pwd)/.venv-bench"
if ! "$venv/bin/python" -c "import httptools, uvloop" 2>/dev/null; then
  echo "[bench] creating $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q uvloop httptools >&2
fi
echo "$venv/bin/python"
