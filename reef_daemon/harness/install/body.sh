# The part of every install script after its values (ADAPTER, WRAPPER, SCENARIO, RELEASE, RELEASE_SHORT, VERSION,
# CHECKSUM, AUTH, SANDBOX_WRITES_TMP, SIDECAR_NAME, FILES) and its functions sidecar_text and write_files.
# Served as part of GET /reef/harness/install; POSIX sh and coreutils only.
say() { printf 'reef install: %s\n' "$*"; }
warn() { printf 'reef install: warning: %s\n' "$*" >&2; }
fail() { printf 'reef install: %s\n' "$*" >&2; exit 1; }
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

if command -v sha256sum >/dev/null 2>&1; then
  digest() { sha256sum | cut -d ' ' -f 1; }
elif command -v shasum >/dev/null 2>&1; then
  digest() { shasum -a 256 | cut -d ' ' -f 1; }
else
  fail "this needs sha256sum or shasum to verify what it writes"
fi

# The real path of a directory that may not exist yet: its nearest existing ancestor resolved, then the rest.
real_path() {
  rp_dir=$1
  rp_rest=''
  while [ ! -d "$rp_dir" ]; do
    rp_rest="/${rp_dir##*/}$rp_rest"
    rp_dir=$(dirname "$rp_dir")
  done
  printf '%s%s\n' "$(cd "$rp_dir" && pwd -P)" "$rp_rest"
}
inside() { case "$1/" in "$2"/*) return 0 ;; esac; return 1; }

# The adapter whose install the sidecar $1 records.
held_by() { sed -n 's/^  "adapter": "\([A-Za-z0-9_-]*\)",\{0,1\}$/\1/p' "$1"; }
# How a refusal tells you to give another root: `reef install` takes it as --root, the piped script as its argument.
ROOT_HOW=${REEF_INSTALL_ROOT_HOW:-as the first argument}
# Each adapter has a root of its own under the scenario's folder, so installs of several adapters sit side by side.
# An install made when the scenario's folder was the root of its one adapter keeps that place.
if [ -n "${1:-}" ]; then
  ROOT=$1
else
  [ -n "${HOME:-}" ] || fail "HOME is not set, so there is no default install root; pass one $ROOT_HOW"
  ROOT=$HOME/reef-harness/$SCENARIO
  if [ ! -f "$ROOT/$SIDECAR_NAME" ] || [ "$(held_by "$ROOT/$SIDECAR_NAME")" != "$ADAPTER" ]; then
    ROOT=$ROOT/$ADAPTER
  fi
fi
case "$ROOT" in /*) ;; *) ROOT="$(pwd -P)/$ROOT" ;; esac
while :; do case "$ROOT" in */) ROOT=${ROOT%/} ;; *) break ;; esac; done
case "$ROOT/" in */./*|*/../*) fail "give the install root without . or .. parts: $ROOT" ;; esac
[ -n "$ROOT" ] || fail "the install root cannot be /"
ROOT=$(real_path "$ROOT")
HERE=$(pwd -P)
# Your home directory is where everything lives, not a project: installing below it from there is fine.
if [ "$HERE" != / ] && [ "$HERE" != "$(real_path "$HOME")" ] && inside "$ROOT" "$HERE"; then
  fail "refusing $ROOT: it is inside the current directory ($HERE), where the agent works and could change its own harness; run this from another directory or pass another root $ROOT_HOW"
fi
REPO=$ROOT
while :; do
  if [ -e "$REPO/.git" ]; then
    fail "refusing $ROOT: it is inside the git work tree $REPO, so the agent working there could change its own harness; pass a root outside any repository $ROOT_HOW"
  fi
  [ "$REPO" = / ] && break
  REPO=$(dirname "$REPO")
done
if [ "$SANDBOX_WRITES_TMP" = 1 ]; then
  for TMP_DIR in /tmp "${TMPDIR:-}"; do
    [ -n "$TMP_DIR" ] && [ -d "$TMP_DIR" ] || continue
    if inside "$ROOT" "$(real_path "$TMP_DIR")"; then
      fail "refusing $ROOT: it is under $TMP_DIR, which $ADAPTER's sandbox lets commands write, so a session could change its own harness; pass a root outside it $ROOT_HOW"
    fi
  done
fi

SIDECAR_FILE="$ROOT/$SIDECAR_NAME"
STUB="$ROOT/$WRAPPER"
BIN_DIR="$HOME/.local/bin"

# Refuse a symbolic link on the way from the root to $1 (a path relative to it), the last part included: writing
# or removing through one would reach outside the install root.
no_link() {
  nl_path=$ROOT
  nl_rest=$1
  while [ -n "$nl_rest" ]; do
    nl_path="$nl_path/${nl_rest%%/*}"
    case "$nl_rest" in */*) nl_rest=${nl_rest#*/} ;; *) nl_rest='' ;; esac
    if [ -L "$nl_path" ]; then
      fail "refusing $ROOT: $nl_path is a symbolic link, and writing through it would reach outside the install root; remove the link and run this again"
    fi
  done
}
# The files the previous install wrote, from its sidecar.
old_files() {
  [ -f "$SIDECAR_FILE" ] || return 0
  sed -n 's/^    "\([A-Za-z0-9._/-]*\)": "[0-9a-f]\{64\}",\{0,1\}$/\1/p' "$SIDECAR_FILE"
}
for LINK_CHECK in $FILES $(old_files) "$SIDECAR_NAME" "$SIDECAR_NAME.new" "$WRAPPER" "$WRAPPER.new" \
  .reef-token .reef-token.new; do
  no_link "$LINK_CHECK"
done

# A root holds one adapter's install: another adapter's would prune this one's files as dropped, breaking its wrapper.
if [ -f "$SIDECAR_FILE" ]; then
  HELD=$(held_by "$SIDECAR_FILE")
  if [ -n "$HELD" ] && [ "$HELD" != "$ADAPTER" ]; then
    fail "refusing $ROOT: it holds the $HELD harness, and installing $ADAPTER there would remove its files; pass a root of its own $ROOT_HOW, or none for $HOME/reef-harness/$SCENARIO/$ADAPTER"
  fi
fi

# The checksum over the files under $1: path, byte length and bytes of each, in the order of FILES.
framed() {
  for fr_path in $FILES; do
    [ -f "$1/$fr_path" ] || { echo "missing $fr_path"; break; }
    printf '%s\n%s\n' "$fr_path" "$(wc -c < "$1/$fr_path" | tr -d ' ')"
    cat "$1/$fr_path"
  done | digest
}

# The interpreter that runs the wrapper: REEF_PYTHON, else the one the reef command uses, else python3.
reef_shebang() {
  rs_reef=$(command -v reef 2>/dev/null) || return 0
  rs_line=$(head -n 1 "$rs_reef")
  case "$rs_line" in '#!/'*) rs_line=${rs_line#'#!'}; case "$rs_line" in *' '*) ;; *) printf '%s\n' "$rs_line" ;; esac ;; esac
}
find_python() {
  for fp_candidate in "${REEF_PYTHON:-}" "$(reef_shebang)" python3; do
    [ -n "$fp_candidate" ] || continue
    fp_path=$(command -v "$fp_candidate" 2>/dev/null) || continue
    if "$fp_path" -c 'import adapters.wrapper' >/dev/null 2>&1; then
      printf '%s\n' "$fp_path"
      return 0
    fi
  done
  return 1
}
if PY=$(find_python); then :; else
  PY=python3
  warn "$WRAPPER needs reef's Python package, which no python here imports; install it (pip install reef-infra) and run this again"
fi
stub_text() {
  printf '#!/bin/sh\n# %s: runs %s with the reef harness in this folder. Written by the reef install script.\n' "$WRAPPER" "$ADAPTER"
  printf 'REEF_HARNESS_ROOT=%s\nexport REEF_HARNESS_ROOT\n' "$(quote "$ROOT")"
  printf 'exec %s -m adapters.wrapper %s "$@"\n' "$(quote "$PY")" "$ADAPTER"
}
token_current() {
  [ -z "${REEF_TOKEN:-}" ] || { [ -f "$ROOT/.reef-token" ] && [ "$(cat "$ROOT/.reef-token")" = "$REEF_TOKEN" ]; }
}
link_current() { [ "$(readlink "$BIN_DIR/$WRAPPER" 2>/dev/null || true)" = "$STUB" ]; }

if [ -f "$SIDECAR_FILE" ] && [ "$(cat "$SIDECAR_FILE")" = "$(sidecar_text)" ] && [ "$(framed "$ROOT")" = "$CHECKSUM" ] \
  && [ -f "$STUB" ] && [ "$(cat "$STUB")" = "$(stub_text)" ] && token_current && link_current; then
  say "already current: $ADAPTER harness $VERSION (release $RELEASE_SHORT) of $SCENARIO in $ROOT"
  exit 0
fi

mkdir -p "$ROOT"
STAGE=$(mktemp -d "$ROOT/.reef-staging.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
write_files "$STAGE"
[ "$(framed "$STAGE")" = "$CHECKSUM" ] || fail "the files did not verify against checksum $CHECKSUM; nothing was changed"

for OLD in $(old_files); do
  case "/$OLD/" in */../*|*/./*) continue ;; esac
  KEEP=no
  for NEW in $FILES; do [ "$NEW" = "$OLD" ] && KEEP=yes; done
  if [ "$KEEP" = no ] && [ -f "$ROOT/$OLD" ]; then
    rm -f "$ROOT/$OLD"
    say "removed $OLD (this release dropped it)"
    OLD_DIR=$(dirname "$OLD")
    while [ "$OLD_DIR" != . ] && rmdir "$ROOT/$OLD_DIR" 2>/dev/null; do OLD_DIR=$(dirname "$OLD_DIR"); done
  fi
done
for NEW in $FILES; do
  mkdir -p "$(dirname "$ROOT/$NEW")"
  mv -f "$STAGE/$NEW" "$ROOT/$NEW"
done
sidecar_text > "$SIDECAR_FILE.new" && mv -f "$SIDECAR_FILE.new" "$SIDECAR_FILE"

if [ -n "${REEF_TOKEN:-}" ]; then
  if ! token_current; then
    (umask 077 && printf '%s\n' "$REEF_TOKEN" > "$ROOT/.reef-token.new") && mv -f "$ROOT/.reef-token.new" "$ROOT/.reef-token"
    say "saved REEF_TOKEN for $WRAPPER (readable only by you)"
  fi
elif [ "$AUTH" = 1 ] && [ ! -f "$ROOT/.reef-token" ]; then
  warn "this daemon needs a token and REEF_TOKEN is unset here, so $WRAPPER will send none; run this again with REEF_TOKEN set"
fi

stub_text > "$STUB.new" && chmod 755 "$STUB.new" && mv -f "$STUB.new" "$STUB"
mkdir -p "$BIN_DIR"
if ! link_current; then
  if [ -e "$BIN_DIR/$WRAPPER" ] && [ ! -L "$BIN_DIR/$WRAPPER" ]; then
    warn "$BIN_DIR/$WRAPPER exists and is not a link, so it was left alone; run $STUB instead"
  else
    EARLIER=$(readlink "$BIN_DIR/$WRAPPER" 2>/dev/null || true)
    ln -sf "$STUB" "$BIN_DIR/$WRAPPER"
    if [ -n "$EARLIER" ]; then
      say "$BIN_DIR/$WRAPPER now runs this harness ($SCENARIO, in $ROOT); it ran $EARLIER, which still runs by that path"
    fi
  fi
fi
case ":${PATH:-}:" in
  *":$BIN_DIR:"*) ;;
  *) warn "$BIN_DIR is not on your PATH; add it (export PATH=\"$BIN_DIR:\$PATH\") or run $STUB" ;;
esac
# Kept in the words of adapters/codex.py CHATGPT_REFUSED.
if [ "$ADAPTER" = codex ] && grep -q '"access_token"' "${CODEX_HOME:-$HOME/.codex}/auth.json" 2>/dev/null; then
  warn "your ChatGPT login is not used by $WRAPPER: codex takes a ChatGPT login only from auth.json (or the keyring) under CODEX_HOME, which reef-codex points at the harness install, and reef copies no login (refresh token included) into its install; model calls go with the daemon's upstream key (inference.upstream-api-key)"
fi
say "installed $ADAPTER harness $VERSION (release $RELEASE_SHORT) of $SCENARIO in $ROOT"
say "run: $WRAPPER    (request, versions, update, report and doctor: $WRAPPER --help)"
