"""English chat patterns for the offline `rules` extractor: text in, unresolved candidates out.

Patterns are compiled once at import. Subjects stay symbolic here ("speaker", "other", "channel"
or "name:<word>") so the stage can resolve them against the turn's participants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.memory import MemoryKind

I = re.IGNORECASE  # noqa: E741

# A value runs lazily up to punctuation or a word that starts a new clause.
_STOP = (
    r"(?=\s*(?:[,;!?()]|\.(?:\s|$)|$|\s-\s|\b(?:but|because|since|though|although|if|unless"
    r"|cause|cuz|thanks|thank you|please|and (?:i|we|my|you|then|also)|so (?:i|we|that|you)"
    r"|as (?:long|well|soon)|which|whenever)\b))"
)
_V = r"(?P<v>[^,;!?()]+?)" + _STOP
# For values followed by more pattern text rather than the end of a clause.
_VM = r"(?P<v>[^,;!?()]+?)"
_ADV = r"(?:(?:really|also|much|generally|usually|definitely|absolutely|just|still|totally|kinda"
_ADV += (
    r"|kind of|actually|honestly|personally|always|do|very much|would|'d|think i|guess i|probably"
)
_ADV += r"|maybe|definitely|certainly)\s+)*"
_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i believe|i suppose|might|not sure"
    r"|pretty sure|i reckon|kinda|sort of|likely|if i remember|iirc|afaik)\b",
    I,
)
_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|all right|right|yes|yeah|yep|sure|so|and|also|oh|well|hey|hi"
    r"|hello|great|cool|perfect|thanks|thank you|update|fyi|btw|quick update|good news|um+|uh+"
    r"|just so you know|for the record|remember|note|noted)\b[\s,.!:-]*)+",
    I,
)
_ADDRESS = re.compile(
    r"^(?:@[\w.-]+\s*[,:]?\s+|(?!(?i:agreed|confirmed|decision|final|settled|decided|note|update"
    r"|fyi|done|finished|deal)\b)[A-Z][\w.-]*\s*[,:]\s+)"
)
_QUESTION_START = re.compile(
    r"^(?:(?:do|does|did|can|could|would|will|are|is|should|shall|have|has|may)\s+"
    r"(?:you|i|we|he|she|they|it|there|anyone|anybody|somebody)\b|(?:what|why|how|who|where"
    r"|which|whats|what's|anyone|anybody)\b)",
    I,
)
_PRONOUN = {
    "it",
    "that",
    "this",
    "you",
    "them",
    "him",
    "her",
    "me",
    "us",
    "one",
    "so",
    "too",
    "those",
    "these",
    "there",
    "here",
    "all",
    "yours",
    "it all",
    "that one",
    "this one",
    "you guys",
    "you too",
    "you more",
    "you less",
    "both",
    "some",
    "stuff",
    "things",
    "everything",
}
_TRAIL = re.compile(
    r"(?:\s+(?:and|or|too|as well|also|anyway|anymore|lol|haha|hehe|then|now|though|either|please|"
    r"okay|ok|really|actually|guys|man|again|more|a lot|so much|very much|the most|best))+$|"
    r"\s*(?::\)|:d|:p|;\)|\^\^|\.\.\.)$",
    I,
)


@dataclass(frozen=True)
class Candidate:
    """One memory item before its subject is resolved to a participant."""

    kind: MemoryKind
    predicate: str
    value: str
    subject: str  # "speaker" | "other" | "channel" | "name:<token>"
    negated: bool = False
    hedged: bool = False
    due_phrase: str | None = None


def _p(pattern: str, flags: int = I) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# --- preferences ---------------------------------------------------------------------------
_PREF: list[tuple[re.Pattern[str], str, bool]] = [
    (_p(rf"\bi(?:'d| would)? {_ADV}(?:prefer|rather) not (?:to )?{_V}"), "dislikes", True),
    (_p(rf"\bi {_ADV}(?:prefer|favou?r)s? (?!not\b){_V}"), "prefers", False),
    (
        _p(
            rf"\bi(?:'d| would) {_ADV}(?:prefer|rather(?: have| take| do| go for| get| sit)?)"
            rf" (?!not\b){_V}"
        ),
        "prefers",
        False,
    ),
    (
        _p(
            rf"\bi(?:'m| am) {_ADV}not (?:a |the )?(?:big |huge |great )?"
            rf"(?:fan of|into|keen on|a fan of) {_V}"
        ),
        "dislikes",
        True,
    ),
    (
        _p(rf"\bi(?:'m| am) {_ADV}(?:a |the )?(?:big |huge |great )?(?:fan of|into|keen on) {_V}"),
        "likes",
        False,
    ),
    (
        _p(
            rf"\bi {_ADV}(?:don't|do not|didn't|dont|never|no longer) {_ADV}(?:like|love|enjoy"
            rf"|care for|do) {_V}"
        ),
        "dislikes",
        True,
    ),
    (
        _p(
            rf"\bi {_ADV}(?:hate|loathe|detest|despise|dislike|can't stand|cannot stand|cant stand"
            rf"|can't bear|avoid) {_V}"
        ),
        "dislikes",
        False,
    ),
    (_p(rf"\bi {_ADV}(?:like|love|enjoy|adore|dig) {_V}"), "likes", False),
    (
        _p(
            rf"\bi {_ADV}never (?P<v>(?:eat|drink|fly|sit|take|book|watch|travel|stay|drive|order|"
            rf"check|use|do)\b[^,;!?()]*?){_STOP}"
        ),
        "dislikes",
        True,
    ),
    (
        _p(
            rf"\bi always (?P<v>(?:eat|drink|fly|sit|take|book|travel|stay|order|get|choose|pick"
            rf"|ask for|go for|use)\b[^,;!?()]*?){_STOP}"
        ),
        "prefers",
        False,
    ),
    (_p(rf"^no {_VM} for me\b"), "dislikes", True),
    (
        _p(rf"^{_VM} (?:works?|is|would be) (?:best|better|ideal|perfect) for me\b"),
        "prefers",
        False,
    ),
    (_p(rf"^{_VM} suits me\b"), "prefers", False),
]

# --- facts about oneself -------------------------------------------------------------------
_NAME_WORD = r"[A-Z][a-z'-]+(?: [A-Z][a-z'-]+)?"
_NOT_NAMES = {
    "Sorry",
    "Fine",
    "Good",
    "Ok",
    "Okay",
    "Not",
    "So",
    "Just",
    "Really",
    "Here",
    "Back",
    "Glad",
    "Happy",
    "Sure",
    "Afraid",
    "Going",
    "Gonna",
    "Trying",
    "Still",
    "Also",
    "Very",
    "Done",
    "Having",
    "Looking",
    "Calling",
    "Contacting",
    "Ready",
    "Pretty",
    "Kinda",
    "New",
    "Home",
    "Excited",
    "Stuck",
    "Fairly",
    "Totally",
    "Actually",
    "Thinking",
    "In",
    "On",
    "At",
    "With",
    "Almost",
    "Interested",
    "Leaving",
    "Working",
    "Using",
    "Running",
    "Based",
    "From",
    "Allergic",
    "Vegan",
    "Vegetarian",
    "Tired",
    "Busy",
    "Free",
    "Off",
    "Out",
    "Late",
    "Sick",
    "Lost",
    "Mrs",
    "Mr",
    "Dr",
    "Curious",
    "Wondering",
    "Confused",
    "Worried",
    "Available",
    "Planning",
    "Hoping",
}
_NAME_PATTERNS = [
    _p(rf"\bmy name(?:'s| is) (?P<v>{_NAME_WORD})", 0),
    _p(rf"\b(?:[Cc]all me|[Ii]t's|[Tt]his is) (?P<v>{_NAME_WORD})\s*(?:[,.!]|$)", 0),
    _p(rf"\b[Ii](?:'m| am) (?P<v>{_NAME_WORD})\b(?!\s+(?:member|user|customer|client))", 0),
]
_DIETS = r"vegetarian|vegan|pescatarian|kosher|halal|gluten[- ]free|lactose[- ]intolerant"
_FACT: list[tuple[re.Pattern[str], str]] = [
    (_p(rf"\bi(?:'m| am) {_ADV}allergic to {_V}"), "allergy"),
    (_p(rf"\bi (?:have|'ve got|got) (?:an? |a severe |a bad )?{_VM} allergy\b"), "allergy"),
    (_p(rf"\bi (?:can't|cannot|cant) (?:eat|have) {_V}"), "allergy"),
    (_p(rf"\bi(?:'m| am) (?:a |an )?(?:strict )?(?P<v>{_DIETS})\b"), "diet"),
    (_p(rf"\bi {_ADV}(?:live|reside) in {_V}"), "lives_in"),
    (_p(rf"\bi(?:'m| am) (?:currently )?(?:based|located|living|staying) in {_V}"), "lives_in"),
    (_p(rf"\bi (?:just )?moved to {_V}"), "lives_in"),
    (_p(rf"\bi(?:'m| am) (?:originally )?from {_V}"), "from"),
    (_p(rf"\bi (?:currently )?work (?:at|for) {_V}"), "works_at"),
    (_p(rf"\bi(?:'m| am) (?:currently )?(?:working|employed) (?:at|for) {_V}"), "works_at"),
    (_p(rf"\bi (?:currently )?work as (?:an? |the )?{_V}"), "role"),
    (
        _p(
            r"\bi(?:'m| am) (?:currently )?(?:an?|the|your) (?!(?:big|huge|great) fan|bit|little"
            r"|lot|few|couple|fan)(?P<v>[a-z][\w -]*?(?:er|or|ist|ian|ant|ent|ee|member|manager"
            r"|lead|head|owner|founder|admin|dev|pm|analyst|coach|chef|nurse|doctor|student|intern"
            r"|consultant|architect|sre|cto|ceo|cfo|vp|user|customer|parent|mom|dad|teacher))\b"
        ),
        "role",
    ),
    (
        _p(rf"\b(?:i|we) (?:usually |always |currently |mostly )?(?:deploy|ship|push) to {_V}"),
        "deploys_to",
    ),
    (_p(rf"\b(?:i|we)(?:'re| are)? (?:currently |mostly |personally )?(?:use|using) {_V}"), "uses"),
    (
        _p(
            rf"\b(?:i|we)(?:'re| are)? (?:currently |mostly )?(?:run|running|on) {_V}"
            r"(?<=\d)"
        ),
        "runs",
    ),
    (_p(rf"\b(?:i|we) (?:currently |mostly )?run {_V}"), "runs"),
]
_MY_X = _p(
    rf"\bmy (?P<x>[a-z][\w'-]*(?: [a-z][\w'-]*){{0,3}}?)(?: is|'s| are|:| =|, it's| - it's) {_V}"
)
_KNOWN_ATTRS = re.compile(
    r"favou?rite|email|phone|number|birthday|timezone|time zone|address|budget|rate|limit|title|"
    r"manager|team|boss|id\b|account|handle|username|quota|tier|plan|status|language|pronouns|"
    r"seat|diet|airport|hometown|city|wife|husband|partner|daughter|son|dog|cat|deadline|"
    r"salary|code|region|stack|editor|distro|version|home dir|level|membership|class",
    I,
)
_STATE_WORDS = re.compile(
    r"^(?:down|up|broken|slow|dead|fine|ok|okay|gone|useless|not|too|so|very|really|a mess|"
    r"hanging|working|stuck|running|still|kinda|pretty|quite|being|getting|going|on|off|in|at)\b",
    I,
)

# --- agreements, commitments, closures -----------------------------------------------------
_AGREE = [
    _p(
        rf"\bwe(?:'ve| have)? (?:all |finally |just )?(?:settled|agreed|decided|landed|aligned)"
        rf" (?:on|upon) {_V}"
    ),
    _p(rf"\bwe(?:'ve| have)? (?:all |finally |just )?agreed (?:to|that) {_V}"),
    _p(rf"^(?:agreed|confirmed|decision|final|settled|decided)\s*[:\-]\s*{_V}"),
    _p(rf"^(?:i(?:'m| am) |just )?confirming (?:that |the )?{_V}"),
    _p(rf"^(?:let's|lets|let us) (?:go with|go for|stick with|settle on|lock in|do|book) {_V}"),
    _p(rf"\b(?:i'll|i will|we'll|we will|i'm going to) (?:just )?(?:go|stick) with {_V}"),
    _p(rf"^{_VM} it is\s*[.!]*$"),
]
_DEAL = _p(r"^(?:it's a |that's a |ok(?:ay)?,? |fine,? |sounds good,? )?deal\s*[.!]*$")
_COMMIT = _p(
    r"\b(?:i'll|i will|ill|i'm going to|i am going to|i'm gonna|im gonna|i shall|let me|i promise"
    r" to|i can have|i'm on it,? i'll)\s+(?:definitely |also |just |quickly |then |now |still "
    r"|first |personally |gladly |happily |make sure to )*(?P<rest>[^!?;()]+)"
)
_NOT_COMMIT = _p(
    r"^(?:be(?! (?:in touch|there|back|sending|sharing))|need|have(?! (?:it|that|them|the)\b)"
    r"|take (?:that|it|this) as|try\s*$|see\s*$|know|think|say|bet|admit|guess|miss|pass|wait"
    r"|go with|stick with|stick to|just|get right on|die|kill|tell you what|never)\b"
)
_CLOSE = [
    _p(
        rf"^(?:i(?:'ve| have)? )?(?:just |already |finally |now )?(?:sent|shared|emailed|uploaded"
        rf"|pushed|submitted|finished|completed|delivered|posted|attached|shipped|fixed|merged"
        rf"|filed|wrapped up|done with|taken care of|sorted) (?!you\b|it\b|that\b){_V}"
    ),
    _p(
        rf"^(?:i(?:'ve| have) |just |already )+(?:booked|reserved|paid|ordered|cancelled|canceled)"
        rf" (?!you\b|it\b|that\b){_V}"
    ),
    _p(rf"^here(?:'s| is| are) (?P<v>(?:the|your|my|our) [^,;!?()]+?){_STOP}"),
    _p(
        rf"^(?:the |my |your |our )?{_VM} (?:is|are|has been|have been) (?:now |all )?(?:done"
        rf"|finished|sent|complete|completed|shipped|merged|submitted|delivered|sorted)\s*[.!]*$"
    ),
]
_BARE_DONE = _p(
    r"^(?:all |it's |that's |and |its )?(?:done|finished|completed|sorted"
    r"|taken care of)(?: and dusted)?\s*[.!]*$"
)
_CANCEL = _p(
    r"^(?:never\s*mind|nvm|scratch that|forget (?:it|that|about it|about that)|cancel that"
    r"|disregard that|ignore that|no longer needed)\b"
)
_NEED = _p(rf"\b(?:i|we) (?:don't|do not|no longer) need(?: to)? (?:the )?{_V}")
_CANCEL_X = _p(rf"^(?:no need to|(?:i|we) no longer need(?: to)?|don't bother with) {_V}")

# --- claims about someone else ("you prefer", "Sarah is allergic to") ----------------------
_OTHER = re.compile(
    rf"(?:^|[\s,])(?P<who>(?i:you)|@[\w.-]+|[A-Z][a-z]+)\s+(?i:(?:really |also |definitely )?"
    rf"(?P<verb>prefers?|likes?|loves?|enjoys?|hates?|dislikes?|can't stand|(?:doesn't|does not"
    rf"|don't|do not) (?:like|want|eat)|(?:is|are|'re) allergic to|lives? in|works? (?:at|for)"
    rf"|(?:is|are|'re) (?:based|located) in)) {_V}"
)
_OTHER_VERB: dict[str, tuple[MemoryKind, str, bool]] = {
    "prefer": ("preference", "prefers", False),
    "like": ("preference", "likes", False),
    "love": ("preference", "likes", False),
    "enjoy": ("preference", "likes", False),
    "hate": ("preference", "dislikes", False),
    "dislike": ("preference", "dislikes", False),
    "can't stand": ("preference", "dislikes", False),
    "allergic": ("fact", "allergy", False),
    "live": ("fact", "lives_in", False),
    "based": ("fact", "lives_in", False),
    "located": ("fact", "lives_in", False),
    "work": ("fact", "works_at", False),
}
_DUE = _p(
    r"\s*\b(?:by|before|until|on|due|no later than|for)?\s*(?P<d>end of (?:the )?(?:day|week|month)"
    r"|eod|eow|cob|tomorrow(?: morning| afternoon| evening| night)?|tonight|today|later today"
    r"|this (?:afternoon|evening|morning|week(?:end)?)|next (?:week|month|\w+day)"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day(?: morning| afternoon| evening| eod)?"
    r"|noon|midnight|\d{1,2}(?::\d{2})?\s?(?:am|pm)|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct"
    r"|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar"
    r"|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|the \d{1,2}(?:st|nd|rd|th)|\d{4}-\d{2}-\d{2}"
    r"|in (?:a |an |\d+ |two |three )?(?:days?|hours?|weeks?|minutes?))\b"
)


def normalise(text: str) -> str:
    """Undo tokenised spacing ("ca n't", "I 'm", " ,") and curly quotes seen in real chat logs."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("###STOP###", " ")
    text = re.sub(
        r"\b(ca|wo|do|does|did|is|are|was|were|could|should|would|have|has) n't\b", r"\1n't", text
    )
    text = re.sub(r"(\w) '(m|s|re|ve|ll|d)\b", r"\1'\2", text)
    text = re.sub(r"\b(gon|wan) na\b", r"\1na", text)
    text = re.sub(r"\s+([,.!?;:])(?=\s|$)", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def sentences(text: str) -> list[str]:
    """Split a message into sentences, keeping each one's closing punctuation."""
    parts = re.split(r"(?<=[.!?])\s+|\n+|\s+-{1,2}\s+", normalise(text))
    return [p.strip() for p in parts if p.strip()]


def is_question(sentence: str) -> bool:
    body = _ADDRESS.sub("", _FILLER.sub("", sentence))
    tag = re.search(r",\s*(?:right|yeah|no|isn't it|don't you|correct)\W*$", sentence, I)
    return sentence.rstrip().endswith("?") or bool(tag) or bool(_QUESTION_START.match(body))


def clean_value(value: str) -> str:
    """Trim fillers and punctuation from a captured value; '' when nothing worth keeping is left."""
    value = value.strip(" .,:;!'\"-")
    previous = None
    while previous != value:
        previous = value
        value = _TRAIL.sub("", value).strip(" .,:;!'\"-")
    value = re.sub(r"^(?:the|a|an)\s+", "", value, flags=I)
    if value.lower() in _PRONOUN or len(value.split()) > 14:
        return ""
    return value


def snake(words: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")


def candidates(text: str) -> list[Candidate]:
    """Every candidate item in one message; questions give nothing."""
    found: list[Candidate] = []
    for raw in sentences(text):
        if is_question(raw):
            continue
        hedged = bool(_HEDGE.search(raw))
        body = _ADDRESS.sub("", _FILLER.sub("", raw)).strip()
        found.extend(_sentence(body, hedged))
        # Claims about others read the unstripped sentence: "@marco likes X" names its subject.
        found.extend(_about_others(raw, hedged))
    return found


def _sentence(s: str, hedged: bool) -> list[Candidate]:
    out: list[Candidate] = []
    if m := _CANCEL.match(s):
        rest = _NEED.search(s[m.end() :])
        value = clean_value(rest["v"]) if rest else ""
        return [Candidate("closure", "cancels", value, "speaker", hedged=hedged)]
    if _DEAL.match(s):
        return [Candidate("agreement", "agreed", "", "channel", hedged=hedged)]
    if _BARE_DONE.match(s):
        return [Candidate("closure", "closes", "", "speaker", hedged=hedged)]
    for pattern in _AGREE:
        if m := pattern.search(s):
            if value := clean_value(m["v"]):
                out.append(Candidate("agreement", "agreed", value, "channel", hedged=hedged))
            break
    for pattern in (*_CLOSE, _CANCEL_X):
        if (m := pattern.search(s)) and (value := clean_value(m["v"])):
            predicate = "cancels" if pattern is _CANCEL_X else "closes"
            out.append(Candidate("closure", predicate, value, "speaker", hedged=hedged))
            break
    if not out and (c := _commitment(s, hedged)):
        out.append(c)
    out.extend(_preferences(s, hedged))
    out.extend(_facts(s, hedged))
    return out


def _commitment(s: str, hedged: bool) -> Candidate | None:
    m = _COMMIT.search(s)
    if m is None or re.search(r"\b(?:if|unless|whether)\b", s, I):
        return None
    rest = m["rest"].strip()
    if _NOT_COMMIT.match(rest):
        return None
    due = _DUE.search(rest)
    due_phrase = due["d"] if due else None
    if due:
        rest = (rest[: due.start()] + " " + rest[due.end() :]).strip()
    vm = re.match(_V, rest + ".", I)
    value = clean_value(vm["v"]) if vm else ""
    if not value or (len(value.split()) < 2 and value.lower() in {"do", "try", "see", "check"}):
        return None
    return Candidate("commitment", "commitment", value, "speaker", False, hedged, due_phrase)


def _preferences(s: str, hedged: bool) -> list[Candidate]:
    out: list[Candidate] = []
    taken: list[tuple[int, int]] = []
    for pattern, predicate, negated in _PREF:
        for m in pattern.finditer(s):
            if any(a <= m.start("v") < b for a, b in taken):
                continue
            value = clean_value(m["v"])
            value = clean_value(re.sub(r"^to\b\s*", "", value, flags=I))
            if value:
                out.append(Candidate("preference", predicate, value, "speaker", negated, hedged))
                taken.append((m.start(), m.end()))
    return out


def _about_others(s: str, hedged: bool) -> list[Candidate]:
    out: list[Candidate] = []
    for m in _OTHER.finditer(s):
        who, verb = m["who"], m["verb"].lower()
        if who.lower() == "i" or (value := clean_value(m["v"])) == "":
            continue
        negated = verb.startswith(("doesn't", "does not", "don't", "do not"))
        key = "dislike" if negated else next((k for k in _OTHER_VERB if k in verb), "")
        if not key:
            continue
        kind, predicate, _ = _OTHER_VERB[key]
        subject = "other" if who.lower() == "you" else f"name:{who}"
        out.append(Candidate(kind, predicate, value, subject, negated, hedged))
    return out


def _facts(s: str, hedged: bool) -> list[Candidate]:
    out: list[Candidate] = []
    for pattern in _NAME_PATTERNS:
        m = pattern.search(s)
        if m and m["v"].split()[0] not in _NOT_NAMES:
            out.append(Candidate("fact", "name", m["v"], "speaker", hedged=hedged))
            break
    for pattern, predicate in _FACT:
        if (m := pattern.search(s)) and (value := clean_value(m["v"])):
            if predicate in {"uses", "runs"} and re.match(r"^(?:to|the same|it|a lot)\b", value):
                continue
            out.append(Candidate("fact", predicate, value, "speaker", hedged=hedged))
    for m in _MY_X.finditer(s):
        attr, value = m["x"].strip(), clean_value(m["v"])
        if not value or _STATE_WORDS.match(value) or attr in {"name", "god"}:
            continue
        if _KNOWN_ATTRS.search(attr) or re.search(r"[\d_@A-Z-]", value):
            out.append(Candidate("fact", snake(attr), value, "speaker", hedged=hedged))
    return out
