"""The install script: POSIX sh that needs nothing but coreutils. Everything it writes rides inline; running it
calls no reef route and it carries no token (the token comes from the installing shell's REEF_TOKEN).

Every value from the daemon reaches the script either shell-quoted or inside a quoted here-document whose
delimiter provably does not occur in the text.
"""

from __future__ import annotations

import hashlib
import shlex
from importlib import resources

from reef_contract import INSTALL_SIDECAR, TOKEN_ENV
from reef_daemon.harness.install.files import InstallFiles

_BODY = resources.files("reef_daemon.harness.install").joinpath("body.sh").read_text(encoding="utf-8")


def install_script(adapter: str, wrapper: str, install: InstallFiles, *, scenario: str, release_id: str,
                   version: str, auth: bool, sandbox_writes_tmp: bool) -> str:  # fmt: skip
    """The whole script for one install."""
    values = {
        "ADAPTER": adapter,
        "WRAPPER": wrapper,
        "SCENARIO": scenario,
        "RELEASE": release_id,
        "RELEASE_SHORT": release_id[:8],
        "VERSION": version,
        "CHECKSUM": install.checksum,
        "AUTH": "1" if auth else "0",
        "SANDBOX_WRITES_TMP": "1" if sandbox_writes_tmp else "0",
        "SIDECAR_NAME": INSTALL_SIDECAR,
        "FILES": "\n".join(sorted(install.files)),
    }
    lines = [
        "#!/bin/sh",
        f"# reef: installs a harness release for {adapter}. Usage: sh install.sh [ROOT]",
        "# ROOT defaults to ~/reef-harness/<scenario>/<adapter>. Needs only sh and coreutils; the token, if the",
        f"# daemon needs one, comes from {TOKEN_ENV} in your shell and never from this script.",
        "set -euf",
        "umask 022",
        *(f"{name}={shlex.quote(value)}" for name, value in values.items()),
        "sidecar_text() {",
        f"  cat <<'{_delimiter(install.sidecar)}'",
        install.sidecar,
        _delimiter(install.sidecar),
        "}",
        "write_files() {",
    ]
    for path, text in sorted(install.files.items()):
        lines.append(f'  mkdir -p "$1"/{shlex.quote(path.rpartition("/")[0] or ".")}')
        lines.extend(_write_file(path, text))
    lines.append("}")
    return "\n".join(lines) + "\n" + _BODY


def _write_file(path: str, text: str) -> list[str]:
    """Lines writing `text` to "$1"/path byte for byte. A here-document always ends with a newline, so a text
    without one is read back through a command substitution, which drops trailing newlines (the text has none)."""
    delimiter = _delimiter(text)
    target = f'"$1"/{shlex.quote(path)}'
    if text.endswith("\n"):
        return [f"  cat > {target} <<'{delimiter}'", text + delimiter]
    raw = f'"$1"/{shlex.quote(path + ".reef-raw")}'
    return [
        f"  cat > {raw} <<'{delimiter}'",
        text,
        delimiter,
        f"  printf '%s' \"$(cat {raw})\" > {target} && rm -f {raw}",
    ]


def _delimiter(text: str) -> str:
    """A here-document delimiter that is no line of `text`."""
    lines = set(text.split("\n"))
    delimiter = "REEF_EOF_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    while delimiter in lines:
        delimiter += "_"
    return delimiter


def failure_script(message: str) -> str:
    """A script that only says why the install cannot happen, and exits 1."""
    return "\n".join(
        [
            "#!/bin/sh",
            "# reef: the harness install failed; this script only says why.",
            f"printf '%s\\n' {shlex.quote('reef: the harness install failed: ' + message)} >&2",
            "exit 1",
            "",
        ]
    )
