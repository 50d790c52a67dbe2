"""Screens for untrusted text: credential-shaped literals and instruction-override phrasing.

Each rule has a name a person can search for. A match is reported by rule name only; the matched text is never
echoed, logged or stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    what: str  # "an API key": completes "the text contains ..."
    pattern: re.Pattern[str]


CREDENTIAL_RULES: tuple[Rule, ...] = (
    Rule("private-key", "a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    Rule("api-key", "an API key", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}")),
    Rule(
        "github-token", "a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")
    ),
    Rule("slack-token", "a Slack token", re.compile(r"\bxox[baprs]-[A-Za-z0-9-]{10,}")),
    Rule("aws-access-key", "an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    Rule("google-api-key", "a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    Rule("bearer-token", "a bearer token", re.compile(r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{20,}=*")),
)
OVERRIDE_RULES: tuple[Rule, ...] = (
    Rule(
        "instruction-override",
        "instruction-override phrasing",
        re.compile(
            r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
            r"(?:previous|prior|above|earlier|system|preceding)\s+(?:instructions|prompts?|rules|messages)",
            re.IGNORECASE,
        ),
    ),
    Rule("forged-system-prompt", "a forged system prompt header", re.compile(r"(?im)^\s*system\s*prompt\s*:")),
    Rule(
        "chat-template-token",
        "chat-template control tokens",
        re.compile(r"<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text)\|>|\[/?INST\]|<</?SYS>>"),
    ),
)
# Config keys that name a secret; a non-numeric literal under one is refused.
SECRET_KEY = re.compile(r"(?i)^(?:.*[_-])?(?:api[_-]?keys?(?:[_-]env)?|tokens?|secrets?|passwords?|apikey)$")


def find_credential(text: str) -> Rule | None:
    """The first credential rule the text breaks, if any."""
    return next((rule for rule in CREDENTIAL_RULES if rule.pattern.search(text)), None)


def find_override(text: str) -> Rule | None:
    """The first instruction-override rule the text breaks, if any."""
    return next((rule for rule in OVERRIDE_RULES if rule.pattern.search(text)), None)


def screen_request(text: str) -> Rule | None:
    """The rule a change request's text breaks: credentials first, then instruction overrides."""
    return find_credential(text) or find_override(text)
