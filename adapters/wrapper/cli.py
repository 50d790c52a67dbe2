"""Parsing `reef-<adapter> [command] [args]`: the wrapper's own commands by name; anything else runs the agent."""

from __future__ import annotations

import argparse
import sys

from adapters.wrapper import commands
from adapters.wrapper.installed import NotInstalled, load
from adapters.wrapper.session import run
from adapters.wrapper.thumbs import thumbs
from reef_client import ReefClientError

COMMANDS = ("good", "bad", "report", "request", "versions", "update", "doctor")
# Old names of commands, still taken: harness commands installed before the rename run `evolve`.
ALIASES = {"evolve": "request"}


def parser(wrapper: str, agent: str) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=wrapper,
        description=f"Run {agent} with the reef harness installed here; every model call goes through reef.",
        epilog=f"Anything else runs {agent} with those arguments; after -- even these words go to {agent}.",
    )
    sub = top.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for verdict in ("good", "bad"):
        thumb = sub.add_parser(verdict, help=f"inside a session: score its last answer {verdict}, as the TUI's keys")
        thumb.add_argument("feedback", nargs="*", help="what went well or wrong, in words")
    scored = sub.add_parser("report", help="score the last session (one report for all its model calls)")
    scored.add_argument("--score", type=float, required=True, help="a number; higher is better")
    scored.add_argument("--feedback", help="what went well or wrong, in words")
    change = sub.add_parser(
        "request", aliases=list(ALIASES), help="file a change request: ask reef for a harness change"
    )
    change.add_argument("text", help="what to change, in your own words")
    change.add_argument("--wait", action="store_true", help="watch the request until it settles")
    change.add_argument(
        "--timeout", type=float, help="seconds --wait waits (exit 2 after): 1800, or 600 on the small embedded model"
    )
    listed = sub.add_parser("versions", help="this harness's versions: installed, current, pending")
    listed.add_argument("install", nargs="*", metavar="vN install", help="install version vN instead of listing")
    upgrade = sub.add_parser("update", help="install the served version (or --release vN)")
    upgrade.add_argument("--release", help="a version (v3) or release id to install instead")
    sub.add_parser("doctor", help="check the daemon, the token, the agent and the install")
    return top


def main(argv: list[str]) -> int:
    """`argv` is `<adapter> [command] [args]`; returns the exit status."""
    if not argv:
        print("usage: python -m adapters.wrapper <adapter> [command] [args]", file=sys.stderr)
        return 2
    adapter, args = argv[0], argv[1:]
    wrapper = f"reef-{adapter}"
    own = bool(args) and (args[0] in COMMANDS or args[0] in ALIASES or args[0] in ("-h", "--help"))
    try:
        installed = load(adapter)
        if not own:
            return run(installed, args[1:] if args[:1] == ["--"] else args)
        options = parser(wrapper, installed.adapter.binary).parse_args(args)
        if options.command in ("good", "bad"):
            return thumbs(installed, options.command == "good", " ".join(options.feedback))
        if options.command == "report":
            return commands.report(installed, options.score, options.feedback)
        if ALIASES.get(options.command, options.command) == "request":
            return commands.request(installed, options.text, options.wait, options.timeout)
        if options.command == "versions":
            return commands.versions(installed, options.install)
        if options.command == "update":
            return commands.update(installed, options.release)
        return commands.doctor(installed)
    except (NotInstalled, ValueError) as exc:
        print(f"{wrapper}: {exc}", file=sys.stderr)
        return 1
    except ReefClientError as exc:
        print(f"{wrapper}: {exc.message}", file=sys.stderr)
        return 1
