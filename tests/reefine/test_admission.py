"""Admission: the same checks for every proposal, each refusal a sentence naming what to fix, never a secret."""

from __future__ import annotations

import pytest

from adapters import get_adapter
from reef_daemon.harness.admission import Refused, admit
from reef_harness import Entry, Mutation

PI = get_adapter("pi")
EXISTING = [Entry("brief", "skill", {"name": "brief", "text": "Be brief."})]


def create(entry_id: str, kind: str, **config: object) -> Mutation:
    return Mutation("create", entry_id, Entry(entry_id, kind, dict(config)))


def refusal(mutations: list[Mutation], adapter: str = "pi") -> str:
    with pytest.raises(Refused) as caught:
        admit(EXISTING, mutations, get_adapter(adapter))
    return " ".join(caught.value.reasons)


def test_accepts_creates_updates_and_removes() -> None:
    tree = admit(
        EXISTING,
        [
            Mutation("update", "brief", Entry("brief", "skill", {"name": "brief", "text": "Be briefer."})),
            create("house", "rules", text="Run tests first."),
            create("notify", "extension", name="notify", code="if (ctx.hasUI) {\n  console.log('done');\n}"),
        ],
        PI,
    )
    assert [entry.id for entry in tree] == ["brief", "house", "notify"]
    assert admit(tree, [Mutation("remove", "house")], PI)[1].id == "notify"


@pytest.mark.parametrize(
    ("mutations", "message"),
    [
        ([create("../etc", "skill", name="x", text="t")], "entry id '../etc' is not allowed; ids start with"),
        ([create("ok", "skill", name="bad name", text="t")], "has name 'bad name'; names start with a letter"),
        ([create("reef-requests", "command", name="r", text="t")], "entry 'reef-requests' is reef's own"),
        ([create("mine", "command", name="reefine", text="t")], "uses the name 'reefine', which is reef's own"),
        ([create("brief", "skill", name="brief", text="t")], "entry 'brief' already exists; update it instead"),
        ([Mutation("remove", "ghost")], "entry 'ghost' does not exist, so it cannot be removed"),
        ([create("x", "widget", text="t")], "entry 'x' has kind 'widget'; kinds are skill, rules"),
        ([create("x", "skill", name="x", text="  ")], "entry 'x' needs a non-empty text field 'text'"),
        ([create("x", "rules", text="t", colour="red")], "unknown field(s) colour"),
        ([], "the change has no entries"),
    ],
)
def test_refuses_each_tree_rule_with_its_sentence(mutations: list[Mutation], message: str) -> None:
    assert message in refusal(mutations)


def test_refuses_a_kind_the_adapter_cannot_render() -> None:
    message = refusal([create("n", "extension", name="n", code="export {}")], adapter="codex")
    assert (
        message == "entry 'n' is of kind extension, which codex cannot load; use one of: rules, skill, command, config"
    )


@pytest.mark.parametrize(
    ("secret", "rule"),
    [
        ("sk-proj-abcdefghijklmnop1234", "api-key"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123", "github-token"),
        ("AKIAABCDEFGHIJKLMNOP", "aws-access-key"),
        ("-----BEGIN RSA PRIVATE KEY-----", "private-key"),
        ("xoxb-1234567890-abcdef", "slack-token"),
    ],
)
def test_refuses_credentials_naming_the_field_never_the_value(secret: str, rule: str) -> None:
    message = refusal([create("x", "skill", name="x", text=f"Use {secret} to log in.")])
    assert "entry 'x' field 'text' contains what looks like" in message and f"(rule {rule})" in message
    assert secret not in message


def test_refuses_literal_secrets_in_config_keys() -> None:
    message = refusal([create("c", "config", data={"search": {"api_key": "hunter2hunter2"}})])
    assert "field 'data.search.api_key' holds a literal secret" in message and "hunter2" not in message
    admit(EXISTING, [create("c", "config", data={"retry": {"max_tokens": 3}})], PI)


@pytest.mark.parametrize(
    "code",
    [
        "export default () => {\n  console.log('hi');\n}",
        "process.stdout.write('x')",
        "ctx.ui.notify('a');\n\nconsole.error('b')",
    ],
)
def test_refuses_console_writes_without_a_ui_guard(code: str) -> None:
    assert "writes to the console on line" in refusal([create("n", "extension", name="n", code=code)])


def test_a_guard_on_the_previous_line_is_enough() -> None:
    admit(EXISTING, [create("n", "extension", name="n", code="if (!ctx.hasUI) return;\nconsole.log('x')")], PI)


@pytest.mark.parametrize("adapter", ["pi", "codex", "dsh"])
def test_refuses_what_an_install_could_not_write(adapter: str) -> None:
    """Admission checks the files an install writes, so an admitted change always installs."""
    message = refusal([create("nul", "skill", name="nul", text="before\x00after")], adapter)
    assert message.startswith(f"the file {get_adapter(adapter).renders['skill'].replace('<name>', 'nul')}")
    assert message.endswith("would hold a NUL character; remove it from the entry's text")
