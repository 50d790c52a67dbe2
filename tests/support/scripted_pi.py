"""A scripted stand-in for pi's headless mode (`pi -p PROMPT`), for the evaluation gate's logic tests.

It reads the harness where pi does (the agent directory's `settings.json`, `models.json` and `AGENTS.md`, and
the working folder's `AGENTS.md`), sends
one chat completion through the model binding (header values and the key may name environment variables, as in
pi), and prints the answer, as `pi -p` does. A test that is about what a real pi does with a harness runs pi itself;
this one answers in a fraction of a second, so the tests of how the gate weighs evidence do not pay for node's start.
Standard library only, and no reef import: it runs as its own program, inside the trial's jail.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "-p":
        print(f"usage: pi -p PROMPT (got {argv!r})", file=sys.stderr)
        return 2
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    settings = json.loads((agent / "settings.json").read_text())
    provider = json.loads((agent / "models.json").read_text())["providers"][settings["defaultProvider"]]
    headers = {name: os.environ.get(value, value) for name, value in provider.get("headers", {}).items()}
    headers["authorization"] = "Bearer " + os.environ.get(provider["apiKey"], provider["apiKey"])
    headers["content-type"] = "application/json"
    # pi's instructions: the agent directory's AGENTS.md, then the one of the folder it starts in.
    rules = [path.read_text() for path in (agent / "AGENTS.md", Path("AGENTS.md")) if path.is_file()]
    system = [{"role": "system", "content": "\n\n".join(rules)}] if rules else []
    body = {"model": settings["defaultModel"], "messages": [*system, {"role": "user", "content": argv[1]}]}
    request = urllib.request.Request(
        provider["baseUrl"].rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        print(f"Error: {error.code} {error.read().decode(errors='replace')}", file=sys.stderr)
        return 1
    print(answer["choices"][0]["message"]["content"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
