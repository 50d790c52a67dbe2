"""The user's words: what the message a user sent after an answer says of that answer, read by rules, with no model.

`read_words` answers "low" ("no", "that's wrong", "still fails", "undo", "doesn't work", "revert"), "high"
("thanks", "works", "perfect", "great, that fixed it") or None, with the phrase that decided. It answers only what
it can answer with confidence: a question, a new request with no verdict, a verdict about something else ("it works
on linux, fails on mac") or a message that says both is None, and the model judge (when there is one) reads it.

How it reads, in one pass over at most MAX_CHARS characters (no regular expression, so no input can make it slow):
- Code is not the user's words: fenced and indented blocks, `inline code`, the lines of a pasted log or traceback.
- The prose is cut into sentences (. ! ? ; and line ends) and clauses (, : and brackets), and each clause into
  words, with contractions written out ("doesn't" → "does not") and a few common typos read as meant.
- Each clause is matched against PHRASES, leftmost and longest first. Some phrases count only as a clause's first
  words ("revert …", "great, …") or as the whole clause ("no", "works"); a phrase right after "not", "no" or
  "never" counts for nothing ("not bad" and "nothing wrong" are phrases of their own), and an approval with
  "on", "for", "in", "with", "only" … after it in its clause is limited to something else and counts for nothing.
- In a question only the complaints that stay complaints as questions count ("why does it still fail?"), and none
  in one that asks whether ("is it still broken?"); after "if", "make sure", "should", "maybe" and the like the
  rest of the sentence is hypothetical and counts for nothing.
- Thanks and "great" are only politeness next to a complaint: "thanks, but it still fails" is low. A real approval
  ("works", "fixed", "perfect") next to a complaint is low only when a "but" (however, though …) puts the
  complaint last ("works, but the other test fails now"); otherwise the message is mixed and None.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

MAX_CHARS = 4000  # a verdict opens a message; what follows is a new request, code or a log

WordsScore = Literal["low", "high"]
_Kind = Literal["low", "approval", "politeness", "neutral"]


@dataclass(frozen=True)
class WordsReading:
    """What a next message says of the answer before it, and the phrase that decided (as PHRASES writes it)."""

    score: WordsScore
    phrase: str


@dataclass(frozen=True)
class _Phrase:
    text: str
    kind: _Kind
    place: Literal["anywhere", "opening", "alone"] = "anywhere"
    asked: bool = False  # still a complaint in a question ("why does it still fail?")


def _phrases(kind: _Kind, texts: str, place: Literal["anywhere", "opening", "alone"] = "anywhere") -> list[_Phrase]:
    return [_Phrase(text.strip(), kind, place) for text in texts.split("|")]


def _asked(texts: str) -> list[_Phrase]:
    return [_Phrase(text.strip(), "low", "anywhere", asked=True) for text in texts.split("|")]


_STILL = (
    "fails|failing|fail|failed|broken|wrong|crashes|crashing|crash|errors|erroring|error|hangs|hanging|red|the same"
    "|same|getting|get|seeing|see|happening|happens|there|times out|throws|throwing|returns|returning|shows|showing"
    "|have|has|occurs|not|does not|do not|did not|is not|can not|will not|no|slow|flaky|printing|timing out"
)
PHRASES: tuple[_Phrase, ...] = (
    *_asked("|".join(f"still {word}" for word in _STILL.split("|"))),
    *_asked("does not work|did not work|not working|same error|same problem|same issue|same bug"),
    *_asked("same result|same thing|same exception"),
    *_phrases("low", "no|no no|no no no|nope|undo|revert|stop|wrong|incorrect|broken|not fixed", "alone"),
    *_phrases("low", "nope|nah|undo|revert|rollback|roll back|try again|wtf", "opening"),
    *_phrases(
        "low",
        "wrong|incorrect|not right|not correct|that is not it|not what i|not quite|misunderstood|you misread"
        "|does not compile|did not compile|will not compile|does not build|does not run|does not fix|did not fix"
        "|did not help|does not help|did nothing|did not do anything|not going to work|no change|never worked"
        "|nothing works|nothing compiles|nothing changed"
        "|is broken|are broken|broken again|broke|made it worse|even worse|worse now|is worse"
        "|it crashes|it crashed|crashes now|now crashes|it fails|it failed|fails now|now fails|now failing"
        "|failing now|tests fail|test fails|tests are failing|tests failing|does not exist|thanks for trying"
        "|thanks for nothing|nice try"
        "|thanks anyway|undo that|undo it|undo this|undo everything|undo all|undo your|undo the last|revert that"
        "|revert it|revert this|revert everything|revert all|revert your|revert the change|revert the changes"
        "|revert those|roll it back|roll that back|put it back|change it back|go back to the previous"
        "|go back to the old|go back to the original|👎",
    ),
    *_phrases(
        "approval",
        "works|worked|working|fixed|solved|perfect|exactly|lgtm|excellent|awesome|brilliant|beautiful|amazing",
        "alone",
    ),
    *_phrases("approval", "perfect|awesome|excellent|brilliant|beautiful|amazing|exactly|lgtm|fixed|solved", "opening"),
    *_phrases(
        "approval",
        "it works|that works|this works|works now|it works for me|works for me|works great|works perfectly|works fine"
        "|working fine"
        "|works like a charm|it is working|working now|all working|everything works|that worked|it worked"
        "|fixed it|did the trick|that did it|nailed it|problem solved|that solved it|spot on|love it|ship it"
        "|looks good|looks great|looks perfect|good job|great job|nice job|nice work|well done|nice one"
        "|tests pass|tests are passing|tests passing|all green|green now|passes now|it passes|it compiles"
        "|compiles now|it builds|builds now|no more errors|error is gone|errors are gone|no longer fails"
        "|no longer failing|no longer crashes|no longer errors|no longer hangs|does not fail anymore"
        "|does not crash anymore|not failing anymore|not broken anymore|exactly what i|exactly it|all passing"
        "|passing now|👍|🎉|✅",
    ),
    *_phrases("politeness", "thanks|thank you|thanks a lot|appreciate it|much appreciated|not bad|🙏"),
    *_phrases("politeness", "great|nice|cool|cheers|sweet", "opening"),
    *_phrases(
        "neutral",
        "no problem|no worries|no thanks|no rush|no need|thanks in advance|great question|good question"
        "|whatever works|nothing wrong",
    ),
)


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words read as meant: contractions written out, a few common typos and spellings.
_SPELLED_OUT: dict[str, tuple[str, ...]] = {
    **{f"{verb}nt": (verb, "not") for verb in ("does", "do", "did", "is", "are", "was", "were", "has", "have")},
    **{f"{verb}nt": (verb, "not") for verb in ("would", "should", "could")},
    "dosent": ("does", "not"), "dosnt": ("does", "not"), "doesn": ("does", "not"), "didn": ("did", "not"),
    "cant": ("can", "not"), "cannot": ("can", "not"), "wont": ("will", "not"), "thats": ("that", "is"),
    "its": ("it", "is"), "whats": ("what", "is"), "theres": ("there", "is"), "im": ("i", "am"),
    "thx": ("thanks",), "thnx": ("thanks",), "thanx": ("thanks",), "thnks": ("thanks",), "thnaks": ("thanks",),
    "tnx": ("thanks",), "ty": ("thanks",), "tysm": ("thanks",), "tyvm": ("thanks",), "thanksss": ("thanks",),
    "wokrs": ("works",), "wroks": ("works",), "borken": ("broken",), "prefect": ("perfect",),
}  # fmt: skip
_FILLERS = _word_set("hmm hm uh um ugh oh ah well ok okay so and but yeah yep yes sorry lol haha please pls just then")
_NEGATORS = _word_set("not no never nothing hardly")
# After one of these, the rest of the sentence is what might be, not what is.
_HYPOTHETICAL = _word_set(
    "if whether unless until ensure sure check checks verify verifies confirm should hopefully maybe might could "
    "would perhaps assert asserts expect"
)
# After an approval in its clause, a word that limits it to something else: "it works fine on linux", "works for the
# happy path".
_LIMITERS = _word_set("on in for with when if only locally except partially sometimes mostly but")
# A question that opens with one of these asks whether ("is it still broken?"): no complaint counts in it.
_YES_NO_OPENINGS = _word_set("is are was were does do did can could will would has have should")
_CONTRASTS = _word_set("but however though although except")
_SENTENCE_ENDS = frozenset(".!?;")
_CLAUSE_ENDS = frozenset(',:()[]{}"\u201c\u201d\u2014\u2013\u2026*')
_WORD_JOINERS = frozenset(".-/@")  # inside a word when a letter or digit follows: main.py, re-run, src/api
_EMOJI = frozenset("👍👎🎉🙏✅")
# How the lines of a log, a traceback or a shell session open (as written: "Failed again" is prose, "FAILED " is not).
_LOG_OPENINGS = (
    "Traceback (",
    'File "',
    "FAILED ",
    "ERROR ",
    "ERROR:",
    "error:",
    "error[",
    "E   ",
    "npm ERR!",
    ">>> ",
    "$ ",
)
_LONGEST = max(len(phrase.text.split()) for phrase in PHRASES)


def _table() -> dict[tuple[str, ...], list[_Phrase]]:
    table: dict[tuple[str, ...], list[_Phrase]] = {}
    for phrase in PHRASES:
        table.setdefault(tuple(phrase.text.split()), []).append(phrase)
    return table


_TABLE = _table()
_FIRST_WORDS = frozenset(words[0] for words in _TABLE)


@dataclass(frozen=True)
class _Sentence:
    clauses: list[list[str]]
    question: bool


@dataclass(frozen=True)
class _Found:
    phrase: _Phrase
    position: int  # in the message's words, for what comes after a "but"


def read_words(message: str) -> WordsReading | None:
    """What `message`, the user's next message after an answer, says of that answer: low, high, or None when the
    rules cannot tell (no verdict, a question, mixed, about something else)."""
    found: list[_Found] = []
    contrasts: list[int] = []
    position = 0
    for sentence in _sentences(_prose(message[:MAX_CHARS])):
        hypothetical = sentence.question and sentence.clauses[0][0] in _YES_NO_OPENINGS
        for clause in sentence.clauses:
            start = 0
            while start < len(clause) and clause[start] in _FILLERS:
                start += 1
            matches = dict(_matches(clause, start))
            for index, word in enumerate(clause):
                hypothetical = hypothetical or word in _HYPOTHETICAL
                if word in _CONTRASTS:
                    contrasts.append(position + index)
                phrase = matches.get(index)
                if phrase is None or hypothetical or (sentence.question and not phrase.asked):
                    continue
                found.append(_Found(phrase, position + index))
            position += len(clause)
    return _decide(found, contrasts)


def _decide(found: list[_Found], contrasts: list[int]) -> WordsReading | None:
    lows = [f for f in found if f.phrase.kind == "low"]
    approvals = [f for f in found if f.phrase.kind == "approval"]
    polite = [f for f in found if f.phrase.kind == "politeness"]
    if lows and approvals:
        last_low, last_approval = lows[-1].position, approvals[-1].position
        turned = any(last_approval < at < last_low for at in contrasts)
        return WordsReading("low", lows[-1].phrase.text) if turned else None
    if lows:
        return WordsReading("low", lows[0].phrase.text)
    if approvals or polite:
        return WordsReading("high", (approvals or polite)[0].phrase.text)
    return None


def _matches(clause: list[str], start: int) -> Iterator[tuple[int, _Phrase]]:
    """The phrases of one clause by the index of their first word, leftmost and longest first; a phrase after a
    negation is matched (so its words are not read again) as neutral."""
    index = 0
    while index < len(clause):
        phrase = _phrase_at(clause, index, start)
        if phrase is None:
            index += 1
            continue
        negated = index > 0 and clause[index - 1] in _NEGATORS and phrase.kind != "neutral"
        yield index, _Phrase(phrase.text, "neutral") if negated else phrase
        index += len(phrase.text.split())


def _phrase_at(clause: list[str], index: int, start: int) -> _Phrase | None:
    if clause[index] not in _FIRST_WORDS:
        return None
    for size in range(min(_LONGEST, len(clause) - index), 0, -1):
        end = index + size
        for phrase in _TABLE.get(tuple(clause[index:end]), ()):
            if phrase.place == "opening" and index != start:
                continue
            if phrase.place == "alone" and (index != start or end != len(clause)):
                continue
            if phrase.kind == "approval" and any(word in _LIMITERS for word in clause[end:]):
                continue
            return phrase
    return None


def _prose(text: str) -> list[str]:
    """The lines of `text` a person wrote: no fenced or indented code, no pasted log or traceback lines, no
    `inline code`."""
    lines = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
            continue
        if fenced or line.startswith(("    ", "\t")) or _looks_like_output(stripped):
            continue
        lines.append("".join(part for index, part in enumerate(line.split("`")) if index % 2 == 0))
    return lines


def _looks_like_output(line: str) -> bool:
    """A line of a log, a traceback or a shell session (`KeyError: 'x'`, `FAILED tests/…`), an agent's markup
    (`<system-reminder>`) or a slash command."""
    if line.startswith(_LOG_OPENINGS) or line.startswith(("<", "/")):
        return True
    first = line.split(" ", 1)[0]
    return first.endswith(("Error:", "Exception:", "Warning:")) and first[:1].isupper()


def _sentences(lines: list[str]) -> Iterator[_Sentence]:
    for line in lines:
        clauses: list[list[str]] = [[]]
        word: list[str] = []
        for index, char in enumerate(line):
            following = line[index + 1] if index + 1 < len(line) else " "
            if char.isalnum() or char in "_'\u2019" or (char in _WORD_JOINERS and word and following.isalnum()):
                word.append(char)
                continue
            clauses[-1].extend(_words("".join(word)))
            word = []
            if char in _EMOJI:
                clauses[-1].append(char)
            elif char in _SENTENCE_ENDS:
                if any(clauses):
                    yield _Sentence([c for c in clauses if c], char == "?")
                clauses = [[]]
            elif char in _CLAUSE_ENDS or (char == "-" and following == " "):
                clauses.append([])
        clauses[-1].extend(_words("".join(word)))
        if any(clauses):
            yield _Sentence([c for c in clauses if c], False)


def _words(raw: str) -> tuple[str, ...]:
    word = raw.lower().replace("'", "").replace("\u2019", "")
    if not word:
        return ()
    if len(word) > 2 and word.startswith("no") and set(word[2:]) == {"o"}:  # nooo
        return ("no",)
    return _SPELLED_OUT.get(word, (word,))
