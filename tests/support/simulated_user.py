"""A scripted user with a hidden preference, for the scores that need no person: answers must cite a file path.

It drives a session through reef (chat completions, with the session tag) and never sends a score. The fake
upstream answers what each user message asks it to say (`REEF-SAY[...]`), so the test chooses which answers meet
the preference; the user's next message then accepts the answer ("Thanks, next ...") or corrects it ("No, which
file?"), as a person who wanted the path would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_judge import FILE_PATH
from tests.support.reef_testing import Reef


def wants(answer: str) -> bool:
    """The hidden preference: the answer names a file path."""
    return FILE_PATH.search(answer) is not None


def reply_to(answer: str, next_task: str) -> str:
    if wants(answer):
        return f"Thanks, next: {next_task}"
    return f"No, which file? Then: {next_task}"


@dataclass
class SimulatedUser:
    reef: Reef
    session: str
    scenario: str = "demo"
    messages: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[str] = field(default_factory=list)

    async def turn(self, text: str, answer: str) -> str:
        """Send `text` (the upstream is told to answer `answer`); returns the answer's receipt."""
        self.messages.append({"role": "user", "content": f"{text} REEF-SAY[{answer}]"})
        return await self.send()

    async def send(self) -> str:
        """Send the conversation as it is (its last message says what the upstream answers); the receipt."""
        response = await self.reef.post(
            "/v1/chat/completions",
            {"model": "fake-model", "messages": self.messages},
            scenario=self.scenario,
            headers={"x-reef-tag-session": self.session},
        )
        assert response.status == 200, await response.text()
        body = await response.json()
        said = body["choices"][0]["message"]["content"]
        self.messages.append({"role": "assistant", "content": said})
        receipt = response.headers["x-reef-agent-record-id"]
        self.receipts.append(receipt)
        return receipt

    async def conversation(self, answers: list[str]) -> list[str]:
        """One task per answer; each next message replies to the answer before it as the preference says."""
        text = "Where is the login handled?"
        for number, answer in enumerate(answers):
            await self.turn(text, answer)
            text = reply_to(answer, f"task {number + 2}")
        # The last answer is judged by this closing message.
        await self.turn(text, "Done.")
        return self.receipts[: len(answers)]
