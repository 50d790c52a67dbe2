"""The agent proposer's shell tools as they run inside its jail: `harness-check`, `harness-trial` and
`harness-notes` only ask the daemon, which runs them outside the jail (`step_tools.py`), and print its answer.

`python agent_tools.py check|trial|notes ...`; the commands on the agent's PATH run it. The daemon is reached at
`REEF_STEP_URL` (the jail's socket) with the token in `REEF_STEP_TOKEN`, both lent for this run. Standard library
only, and run as a file, so a command starts fast; nothing here is trusted: the bounds are the daemon's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

STEP_URL_ENV = "REEF_STEP_URL"
STEP_TOKEN_ENV = "REEF_STEP_TOKEN"  # noqa: S105 - the variable's name, not a token


def ask(tool: str, body: dict[str, str | None]) -> int:
    """Send one tool request to the daemon, print its answer, return its exit status."""
    request = urllib.request.Request(  # noqa: S310 - the URL is the jail's own socket bridge, set by reef
        f"{os.environ[STEP_URL_ENV]}/reef-step/{tool}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ[STEP_TOKEN_ENV]}"},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            answer = json.load(exc)
        except ValueError:
            answer = {"output": f"refused: the daemon answered {exc.code}", "code": 1}
    except (urllib.error.URLError, OSError) as exc:
        print(f"the daemon could not be reached: {exc}", file=sys.stderr)
        return 1
    print(answer.get("output", ""))
    return int(answer.get("code", 1))


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="harness-tools")
    tools = parser.add_subparsers(dest="tool", required=True)
    tools.add_parser("check", help="admission on the workspace, exactly as the step will run it")
    trial_parser = tools.add_parser("trial", help="run the scenario's agent on the workspace's harness")
    trial_parser.add_argument("prompt")
    trial_parser.add_argument("--expect", help="a regular expression the final answer should match")
    trial_parser.add_argument("--workspace", help="a folder of the workspace copied in as the trial's project")
    notes_parser = tools.add_parser("notes", help="keep working notes with the step")
    notes_parser.add_argument("text")
    parsed = parser.parse_args(args)
    if parsed.tool == "check":
        return ask("check", {})
    if parsed.tool == "trial":
        return ask("trial", {"prompt": parsed.prompt, "expect": parsed.expect, "workspace": parsed.workspace})
    return ask("notes", {"text": parsed.text})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
