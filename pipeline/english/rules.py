"""English chat patterns for the offline `rules` extractor: text in, unresolved candidates out.

Patterns are compiled once at import. Subjects stay symbolic here ("speaker", "other", "channel"
or "name:<word>") so the stage can resolve them against the turn's participants.
"""

from __future__ import annotations

import re
from dataclasses import replace

from pipeline.english.patterns import (
    ADDRESS,
    AGREE,
    APPOSITION,
    BARE_DONE,
    CANCEL,
    CANCEL_X,
    CHOICE_WORDS_AT_MOST,
    CHOSEN_IT_IS,
    CLAUSE_OPENING,
    CLAUSE_WORD,
    CLOSE,
    COMMIT,
    DATE_OF_THING,
    DEAL,
    DONE_SAID_OF,
    DUE,
    FACT,
    FILLER,
    GONE_OUT,
    HEDGE,
    KIN_NAMED,
    KNOWN_ATTRS,
    LOOKUP_VERB,
    MY_X,
    NAME_PATTERNS,
    NEED,
    NEEDS,
    NOT_COMMIT,
    NOT_NAMES,
    OTHER,
    OTHER_VERB,
    PAID_WITH,
    POINTED_CHOICE,
    PREF,
    PRONOUN,
    QUESTION_START,
    REQUEST,
    STATE_WORDS,
    TITLES,
    TRAIL,
    TRAITS,
    Candidate,
    I,
    V,
)
from schemas.memory import PAYS_WITH

# Most preference and fact patterns open with "I" or "we" as a word ("I'd prefer", "we use"): a
# sentence with neither, most of a conversation, skips them after this one search.
FIRST_PERSON = re.compile(r"\b(?:i|we)\b", I)


def _opens_in_first_person(pattern: re.Pattern[str]) -> bool:
    """True when every match starts with "I" or "we" followed by an apostrophe or a space, so a
    sentence FIRST_PERSON does not match cannot match the pattern."""
    return pattern.pattern.startswith((r"\bi ", r"\bi(?:'", r"\b(?:i|we)"))


# The helpers' own patterns, compiled once: re's per-call cache look-up was about a twentieth of
# the extractor's time.
_NOT = re.compile(r"\b(ca|wo|do|does|did|is|are|was|were|could|should|would|have|has) n't\b")
_CLITIC = re.compile(r"(\w) '(m|s|re|ve|ll|d)\b")
_GONNA = re.compile(r"\b(gon|wan) na\b")
_SPACED_MARK = re.compile(r"\s+([,.!?;:])(?=\s|$)")
# A sentence break in normalised text, where all white space is single spaces: a space after
# [.!?], or " - " / " -- ". Opening with the literal space lets re skip straight to spaces;
# r"(?<=[.!?])\s+|\n+|\s+-{1,2}\s+", its form for raw text, tried every position.
_BREAK = re.compile(r" (?:(?<=[.!?] )" + "".join(rf"(?<!\b{t}\. )" for t in TITLES) + "|--? )", I)
_TAG = re.compile(r",\s*(?:right|yeah|no|isn't it|don't you|correct)\W*$", I)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", I)
_NOT_SNAKE = re.compile(r"[^a-z0-9]+")
_CONDITION = re.compile(r"\b(?:if|unless|whether)\b", I)
_VALUE = re.compile(V, I)
_TO = re.compile(r"^to\b\s*", I)
_NOT_DOING = re.compile(r"\bnot (?:to )?$", I)
_NOT_A_THING = re.compile(r"^(?:to|the same|it|a lot)\b")
# Marks of a sentence not meant literally: an upside-down, eye-rolling, unamused or smirking
# face, or "/s".
SARCASM = re.compile("[\U0001f643\U0001f644\U0001f612\U0001f60f]|(?:^|\\s)/s\\b")
_PART_OF = re.compile(r"\b(?:of|what|where|which|how|whether|if)\s*$", re.IGNORECASE)
# Capitalised words that open a sentence without naming anyone ("This is a Gold member
# benefit", "It's a Premium plan").
_NOT_SOMEONE = frozenset(
    [
        "i",
        "it",
        "this",
        "that",
        "there",
        "here",
        "what",
        "which",
        "who",
        "he",
        "she",
        "they",
        "we",
        "everyone",
        "nobody",
        "somebody",
        "someone",
        "mine",
        "yours",
        "ours",
        "theirs",
        "each",
        "either",
        "neither",
    ]
)
# A word that reads as a name: capitalised, then lower case ("Rufus", not "ID").
_NAME = re.compile(r"[A-Z][a-z]")


def _is_someone(word: str) -> bool:
    """Whether a capitalised word before "'s" may name a person ("Nadia's", not "It's")."""
    return bool(_NAME.match(word)) and word.lower() not in _NOT_SOMEONE and word not in NOT_NAMES


# A value that opens with a participle says how a thing stands, not what it is.
_PARTICIPLE = re.compile(r"[a-z]+(?:ed|ing)\b")
# Whose attribute a "my/our/your X is" names.
_WHOSE = {"my": "speaker", "our": "speaker", "your": "other"}
_MARKED = re.compile(r"[\d_@A-Z-]|\w\.\w")
# "my wife is freaking out": what a person or pet is doing, not who or what they are.
_KIN = re.compile(r"\b(?:wife|husband|partner|daughter|son|boss|manager|dog|cat)$", re.IGNORECASE)
_DOING = re.compile(r"^(?:[a-z]+ing|[A-Z]+ING)\b")

# Each pattern beside its literal prefilter (() for none), looked up once here: hashing a
# compiled pattern for a dict look-up costs about as much as a short search.
Needs = tuple[str, ...]
_AGREE: list[tuple[re.Pattern[str], Needs]] = [(p, NEEDS.get(p, ())) for p in AGREE]
_CLOSE: list[tuple[re.Pattern[str], Needs]] = [(p, NEEDS.get(p, ())) for p in (*CLOSE, CANCEL_X)]
_NAMES: list[tuple[re.Pattern[str], Needs]] = [(p, NEEDS.get(p, ())) for p in NAME_PATTERNS]
_COMMIT_NEEDS = NEEDS.get(COMMIT, ())
_MY_X_NEEDS = NEEDS.get(MY_X, ())
_KIN_NAMED_NEEDS = NEEDS.get(KIN_NAMED, ())
_OTHER_NEEDS = NEEDS.get(OTHER, ())
_TRAITS = [(p, predicate, NEEDS.get(p, ())) for p, predicate in TRAITS]
PrefRule = tuple[re.Pattern[str], str, bool, Needs]
FactRule = tuple[re.Pattern[str], str, Needs]
_PREF: list[PrefRule] = [(p, pred, neg, NEEDS.get(p, ())) for p, pred, neg in PREF]
_FACT: list[FactRule] = [(p, pred, NEEDS.get(p, ())) for p, pred in FACT]
PREF_ANYONE = [entry for entry in _PREF if not _opens_in_first_person(entry[0])]
FACT_ANYONE = [entry for entry in _FACT if not _opens_in_first_person(entry[0])]


def normalise(text: str) -> str:
    """Undo tokenised spacing ("ca n't", "I 'm", " ,") and curly quotes seen in real chat logs."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("###STOP###", " ")
    # Each substitution runs only when the literal every match contains is there: sub() costs
    # several times a failed substring test even when nothing matches, on every message.
    if " n't" in text:
        text = _NOT.sub(r"\1n't", text)
    if " '" in text:
        text = _CLITIC.sub(r"\1'\2", text)
    if "n na" in text:
        text = _GONNA.sub(r"\1na", text)
    if _SPACED_MARK.search(text):
        text = _SPACED_MARK.sub(r"\1", text)
    # str.split() splits on exactly the characters \s matches (str.isspace), and strips the ends.
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """Split a message into sentences, keeping each one's closing punctuation."""
    parts = _BREAK.split(normalise(text))
    return [p.strip() for p in parts if p.strip()]


def is_question(sentence: str) -> bool:
    """True for a question: a closing "?", a tag ("..., right?") or a question opening."""
    return _is_question(sentence, _body(sentence))


def _body(sentence: str) -> str:
    """The sentence without its opening fillers and address ("ok so", "@sam,", "Marco:")."""
    return ADDRESS.sub("", FILLER.sub("", sentence))


def _is_question(sentence: str, body: str) -> bool:
    """is_question given the sentence's body (candidates() needs it too); cheap tests first."""
    return (
        sentence.rstrip().endswith("?")
        or _TAG.search(sentence) is not None
        or QUESTION_START.match(body) is not None
    )


def clean_value(value: str) -> str:
    """Trim fillers and punctuation from a captured value; '' when nothing worth keeping is left."""
    value = value.strip(" .,:;!'\"-")
    previous = None
    while previous != value:
        previous = value
        value = TRAIL.sub("", value).strip(" .,:;!'\"-")
    value = _ARTICLE.sub("", value)
    if value.lower() in PRONOUN or len(value.split()) > 14:
        return ""
    return value


def snake(words: str) -> str:
    return _NOT_SNAKE.sub("_", words.lower()).strip("_")


def candidates(text: str) -> list[Candidate]:
    """Every candidate item in one message; questions give nothing."""
    found: list[Candidate] = []
    for raw in sentences(text):
        body = _body(raw)
        if _is_question(raw, body):
            continue
        # Claims about others read the unstripped sentence: "@marco likes X" names its subject.
        out = _sentence(body.strip()) + _about_others(raw)
        if out and SARCASM.search(raw):
            # "I love this job 🙃" says the opposite of a taste or trait; a promise still holds.
            out = [c for c in out if c.kind not in ("preference", "fact")]
        # Most sentences give nothing, so the hedge search runs only on those that do.
        if out and HEDGE.search(raw):
            out = [replace(c, hedged=True) for c in out]
        # Two patterns may read one statement ("I'm based in Berlin"): it is kept once.
        found.extend(c for c in out if c not in found)
    return found


def _lower_ascii(s: str) -> str | None:
    """The sentence in lower case when it is ASCII, else None (no prefilter applies): in ASCII
    text a case-insensitive match is exactly a match in the lower-case form; beyond it re's
    case folding differs from str.lower() (re matches the long s for "s")."""
    return s.lower() if s.isascii() else None


def _ruled_out(low: str | None, needs: Needs) -> bool:
    """True when a pattern with prefilter `needs` cannot match the sentence whose
    `_lower_ascii` form is `low`: it has none of the literals."""
    if low is None or not needs:
        return False
    # A loop, not any(): no generator object on the extractor's most frequent call.
    for literal in needs:  # noqa: SIM110
        if literal in low:
            return False
    return True


def _named_choice(value: str) -> bool:
    """Whether the words before "it is" name a choice ("net-45", "the window seat") rather
    than say a clause ("I don't know what", "yes")."""
    return len(value.split()) <= CHOICE_WORDS_AT_MOST and not CLAUSE_WORD.search(value)


def _sentence(s: str, first_person: bool | None = None) -> list[Candidate]:
    """The candidates of one sentence, unhedged (candidates() marks hedges); `first_person`
    None: whether it says "I" or "we" is looked up (True or False forces it, for tests)."""
    if first_person is None:
        first_person = FIRST_PERSON.search(s) is not None
    low = _lower_ascii(s)
    out: list[Candidate] = []
    if m := CANCEL.match(s):
        rest = NEED.search(s[m.end() :])
        value = clean_value(rest["v"]) if rest else ""
        return [Candidate("closure", "cancels", value, "speaker")]
    if DEAL.match(s):
        return [Candidate("agreement", "agreed", "", "channel")]
    if BARE_DONE.match(s):
        return [Candidate("closure", "closes", "", "speaker")]
    for pattern, needs in _AGREE:
        if not _ruled_out(low, needs) and (m := pattern.search(s)):
            value = clean_value(m["v"])
            if POINTED_CHOICE.match(value):
                # "the first option, Flight HAT136": the words after it name the choice.
                named = APPOSITION.match(s, m.end("v"))
                value = clean_value(named["v"]) if named else ""
            if value and (pattern is not CHOSEN_IT_IS or _named_choice(value)):
                predicate = PAYS_WITH if pattern is PAID_WITH else "agreed"
                out.append(Candidate("agreement", predicate, value, "channel"))
            break
    for pattern, needs in _CLOSE:
        if (
            not _ruled_out(low, needs)
            and (m := pattern.search(s))
            and (value := clean_value(m["v"]))
        ):
            if pattern in (DONE_SAID_OF, GONE_OUT) and CLAUSE_WORD.search(value):
                continue
            predicate = "cancels" if pattern is CANCEL_X else "closes"
            out.append(Candidate("closure", predicate, value, "speaker"))
            break
    if not _ruled_out(low, _COMMIT_NEEDS) and (c := _commitment(s)):
        out.append(c)
    out.extend(_preferences(s, low, _PREF if first_person else PREF_ANYONE))
    out.extend(_facts(s, low, _FACT if first_person else FACT_ANYONE))
    return out


def _commitment(s: str) -> Candidate | None:
    m = COMMIT.search(s)
    if m is None or _CONDITION.search(s):
        return None
    rest = m["rest"].strip()
    if NOT_COMMIT.match(rest):
        return None
    due = DUE.search(rest)
    if due and LOOKUP_VERB.match(rest) and DATE_OF_THING.match(due.group(0)):
        # The date names what is looked up: it stays in the promise and ends it.
        rest, due = rest[: due.end()], None
    due_phrase = due["d"] if due else None
    if due:
        rest = (rest[: due.start()] + " " + rest[due.end() :]).strip()
    vm = _VALUE.match(rest.rstrip(". ") + ".")
    value = clean_value(vm["v"]) if vm else ""
    if not value or (len(value.split()) < 2 and value.lower() in {"do", "try", "see", "check"}):
        return None
    return Candidate("commitment", "commitment", value, "speaker", due_phrase=due_phrase)


def _preferences(s: str, low: str | None, patterns: list[PrefRule]) -> list[Candidate]:
    out: list[Candidate] = []
    taken: list[tuple[int, int]] = []
    for pattern, predicate, negated, needs in patterns:
        if _ruled_out(low, needs):
            continue
        for m in pattern.finditer(s):
            if any(a <= m.start("v") < b for a, b in taken):
                continue
            # Only the words before the value: "I like people who would love to help" likes.
            if predicate == "likes" and REQUEST.search(s, m.start(), m.start("v")):
                continue
            value = clean_value(m["v"])
            # "to pay by card", or "(prefer|rather) not (to) fly at night": something done.
            doing = bool(_TO.match(value) or _NOT_DOING.search(s, m.start(), m.start("v")))
            value = clean_value(_TO.sub("", value))
            if value:
                out.append(
                    Candidate("preference", predicate, value, "speaker", negated, doing=doing)
                )
                taken.append((m.start(), m.end()))
    return out


def _about_others(s: str) -> list[Candidate]:
    out: list[Candidate] = []
    low = _lower_ascii(s)
    for pattern, predicate, needs in _TRAITS:
        for m in () if _ruled_out(low, needs) else pattern.finditer(s):
            who = m["who"]
            if who == "I":
                # "I'm on the Fibre 500 plan"; "I'm a Gold member" is a role (FACT).
                if predicate == "membership" and " on " in m.group(0):
                    out.append(Candidate("fact", predicate, m["v"], "speaker"))
                continue
            if who.lower() == "you":
                out.append(Candidate("fact", predicate, m["v"], "other"))
            elif who.startswith("@") or _is_someone(who):
                out.append(Candidate("fact", predicate, m["v"], f"name:{who}"))
    if _ruled_out(low, _OTHER_NEEDS):
        return out
    for m in OTHER.finditer(s):
        who, verb = m["who"], m["verb"].lower()
        if who.lower() == "i" or (value := clean_value(m["v"])) == "":
            continue
        negated = verb.startswith(("doesn't", "does not", "don't", "do not"))
        key = "dislike" if negated else next((k for k in OTHER_VERB if k in verb), "")
        if not key:
            continue
        kind, predicate, _ = OTHER_VERB[key]
        subject = "other" if who.lower() == "you" else f"name:{who}"
        out.append(Candidate(kind, predicate, value, subject, negated))
    return out


def _facts(s: str, low: str | None, patterns: list[FactRule]) -> list[Candidate]:
    out: list[Candidate] = []
    for pattern, needs in _NAMES:
        m = None if _ruled_out(low, needs) else pattern.search(s)
        if m and m["v"].split()[0] not in NOT_NAMES:
            out.append(Candidate("fact", "name", m["v"], "speaker"))
            break
    for pattern, predicate, needs in patterns:
        if (
            not _ruled_out(low, needs)
            and (m := pattern.search(s))
            and (value := clean_value(m["v"]))
        ):
            if predicate in {"uses", "runs"} and _NOT_A_THING.match(value):
                continue
            if "no" in pattern.groupindex and m["no"]:
                # "I'm not vegetarian anymore": the diet's new value, which replaces the old.
                out.append(Candidate("fact", predicate, f"not {value}", "speaker", negated=True))
                continue
            out.append(Candidate("fact", predicate, value, "speaker"))
    return out + _attributes(s, low)


def _attributes(s: str, low: str | None) -> list[Candidate]:
    """Attributes said with a possessive: "my X is Y" (the speaker's), "your X is Y" (the
    other party's), "Nadia's X is Y", and a relation named ("my sister Chiara")."""
    out: list[Candidate] = []
    for m in () if _ruled_out(low, _MY_X_NEEDS) else MY_X.finditer(s):
        attr, value = m["x"].strip(), clean_value(m["v"])
        if not value or STATE_WORDS.match(value) or attr in {"name", "god"}:
            continue
        if _KIN.search(attr) and _DOING.match(value):
            continue
        if _PART_OF.search(s, 0, m.start()):
            # "most of our code is ...", "one of my IT guys ...", "what my code is": a part or
            # a question, not the speaker's own.
            continue
        if m["sep"] == "'s" and not CLAUSE_OPENING.match(s, 0, m.start()):
            continue
        if any(_NAME.match(word) for word in attr.split()[1:]):
            # "my dog Rufus is ...": a name inside, said by KIN_NAMED; not an attribute.
            continue
        whose = m["whose"].lower()
        if whose in _WHOSE:
            subject = _WHOSE[whose]
        elif _is_someone(m["whose"][:-2]):
            subject = f"name:{m['whose'][:-2]}"
        else:
            continue
        known = KNOWN_ATTRS.search(attr) is not None
        if subject != "speaker":
            # Of someone else, only a known attribute stated plainly: an agent's "your
            # reservation UM3OG5 is a round-trip ..." describes a booking, and "your status is
            # listed as ..." or "under your user ID: M05KNL and ..." say no value.
            if not known or m["sep"] not in (" is", " are") or _PARTICIPLE.match(value):
                continue
        elif not (known or _MARKED.search(value)):
            continue
        out.append(Candidate("fact", snake(attr), value, subject))
    for m in () if _ruled_out(low, _KIN_NAMED_NEEDS) else KIN_NAMED.finditer(s):
        if _NAME.match(m["v"]) and m["v"] not in NOT_NAMES:
            out.append(Candidate("fact", m["x"].lower(), m["v"], "speaker"))
    return out
