"""English chat patterns, compiled once at import, for the rules extractor in rules.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.english.actions import LOOKUP_VERBS
from pipeline.english.numbers import GROUPING_COMMA
from schemas.memory import MemoryKind

I = re.IGNORECASE  # noqa: E741

# A comma grouping thousands is part of a value, not the end of its clause; any other comma
# ends it.
_CLAUSE_COMMA = r",(?!(?<=\d,)\d{3}(?!\d))"
# What a value is made of: anything up to clause punctuation.
_VALUE_CHAR = rf"(?:[^,;!?()]|{GROUPING_COMMA})"
# Titles whose period ends no sentence: "Dr. Patel" is one name (rules.py splits sentences
# around them too). Only titles, which a name follows; "p.m." or "Ave." often end a sentence.
TITLES = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St")
_NOT_AFTER_TITLE = "".join(rf"(?<!\b{title})" for title in TITLES)
# A list's further items ("peanuts, shellfish and dairy"): one to three words each, none
# opening a clause of its own ("aisle, and my husband ..." is two clauses).
_ITEM = (
    r"(?!(?:i|we|you|he|she|they|it|my|our|your|his|her|their|then|also|so|but|not|please"
    r"|thanks)\b)[\w'-]+(?: [\w'-]+){0,2}"
)
_LIST_TAIL = rf"(?:,\s*{_ITEM})+,?\s+(?:and|or)\s+{_ITEM}"
# A value runs lazily up to punctuation or a word that starts a new clause ("... and the
# reservation ID is ..." is one too: a subject and its own verb).
_STOP = (
    rf"(?=\s*(?:{_CLAUSE_COMMA}|[;!?()]|{_NOT_AFTER_TITLE}\.\s|\.$|$|\s-\s"
    r"|\b(?:but|because|since|though|although|if|unless"
    r"|cause|cuz|thanks|thank you|please|and (?:i|we|my|you|then|also)|so (?:i|we|that|you)"
    r"|and (?:the|our|his|her|their|your|my) (?:[\w'-]+ ){1,4}?(?:is|are|was|were)"
    r"|as (?:long|well|soon|an?|the|my|our)|which|whenever)\b))"
)
V = rf"(?P<v>{_VALUE_CHAR}+?(?:{_LIST_TAIL})?)" + _STOP
# For values followed by more pattern text rather than the end of a clause.
_VM = rf"(?P<v>{_VALUE_CHAR}+?)"
_ADV = r"(?:(?:really|also|much|generally|usually|definitely|absolutely|just|still|totally|kinda"
_ADV += (
    r"|kind of|actually|honestly|personally|always|do|very much|would|'d|think i|guess i|probably"
)
_ADV += r"|maybe|definitely|certainly)\s+)*"
HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i believe|i suppose|might|not sure"
    r"|pretty sure|i reckon|kinda|sort of|likely|if i remember|iirc|afaik)\b",
    I,
)
FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|all right|right|yes|yeah|yep|sure|so|and|also|oh|well|hey|hi"
    r"|hello|great|cool|perfect|thanks|thank you|update|fyi|btw|quick update|good news|um+|uh+"
    r"|just so you know|for the record|remember|note|noted)\b[\s,.!:-]*)+",
    I,
)
ADDRESS = re.compile(
    r"^(?:@[\w.-]+\s*[,:]?\s+|(?!(?i:agreed|confirmed|decision|final|settled|decided|note|update"
    r"|fyi|done|finished|deal)\b)[A-Z][\w.-]*\s*[,:]\s+)"
)
# "I would like to cancel", "I would also like a refund": a request for now, not something the
# speaker likes in general (nor is "I'd like ...", which the preference patterns never read).
REQUEST = re.compile(
    r"\bwould (?:(?:really|also|just|still|now|very much|much) )*(?:like|love)\b", I
)
QUESTION_START = re.compile(
    r"^(?:(?:do|does|did|can|could|would|will|are|is|should|shall|have|has|may)\s+"
    r"(?:you|i|we|he|she|they|it|there|anyone|anybody|somebody)\b|(?:what|why|how|who|where"
    r"|which|whats|what's|anyone|anybody)\b)",
    I,
)
PRONOUN = {
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
TRAIL = re.compile(
    r"(?:\s+(?:and|or|too|as well|also|anyway|anymore|lol|haha|hehe|then|now|though|either|please|"
    r"okay|ok|really|actually|guys|man|again|more|a lot|so much|very much|the most|best|btw|tbh"
    r"|fyi|imo|atm|these days|nowadays|originally|for now|for you))+$|"
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
    # A preference for doing something ("I prefer to pay by card", "I'd rather not fly at
    # night"): its value is "pay by card", and a line about it reads "prefers to pay by card"
    # ("prefers not to fly at night").
    doing: bool = False


# A pattern's literal prefilter: every match contains at least one of these lower-case strings,
# so on an ASCII sentence whose lower-case form has none of them the search can be skipped. A
# substring test costs a fraction of a case-insensitive search, which tries every position.
# tests/unit/test_rules_shortcuts.py checks each entry against the pattern's parse tree.
NEEDS: dict[re.Pattern[str], tuple[str, ...]] = {}


def _p(pattern: str, flags: int = I, needs: tuple[str, ...] = ()) -> re.Pattern[str]:
    """The compiled pattern, with `needs` (if any) recorded as its prefilter in NEEDS."""
    compiled = re.compile(pattern, flags)
    if needs:
        NEEDS[compiled] = needs
    return compiled


# --- preferences ---------------------------------------------------------------------------
PREF: list[tuple[re.Pattern[str], str, bool]] = [
    (
        _p(
            rf"\bi(?:'d| would)? {_ADV}(?:prefer|rather) not (?:to )?{V}",
            needs=("prefer not", "rather not"),
        ),
        "dislikes",
        True,
    ),
    (
        _p(rf"\bi {_ADV}(?:prefer|favou?r)s? (?!not\b){V}", needs=("prefer", "favor", "favour")),
        "prefers",
        False,
    ),
    (
        _p(
            rf"\bi(?:'d| would) {_ADV}(?:prefer|rather(?: have| take| do| go for| get| sit)?)"
            rf" (?!not\b){V}",
            needs=("prefer", "rather"),
        ),
        "prefers",
        False,
    ),
    (
        _p(
            rf"\bi(?:'m| am) {_ADV}not (?:a |the )?(?:big |huge |great )?"
            rf"(?:fan of|into|keen on|a fan of) {V}",
            needs=("fan of", "into", "keen on"),
        ),
        "dislikes",
        True,
    ),
    (
        _p(
            rf"\bi(?:'m| am) {_ADV}(?:a |the )?(?:big |huge |great )?(?:fan of|into|keen on) {V}",
            needs=("fan of", "into", "keen on"),
        ),
        "likes",
        False,
    ),
    (
        _p(
            rf"\bi {_ADV}(?:don't|do not|didn't|dont|never|no longer) {_ADV}(?:like|love|enjoy"
            rf"|care for|do) {V}",
            needs=("don", "do not", "didn't", "never", "no longer"),
        ),
        "dislikes",
        True,
    ),
    (
        _p(
            rf"\bi {_ADV}(?:hate|loathe|detest|despise|dislike|can't stand|cannot stand|cant stand"
            rf"|can't bear|avoid) {V}",
            needs=("hate", "loathe", "detest", "despise", "dislike", "stand", "bear", "avoid"),
        ),
        "dislikes",
        False,
    ),
    (
        _p(
            rf"\bi {_ADV}(?:like|love|enjoy|adore|dig) {V}",
            needs=("like", "love", "enjoy", "adore", "dig"),
        ),
        "likes",
        False,
    ),
    (
        _p(
            rf"\bi {_ADV}never (?P<v>(?:eat|drink|fly|sit|take|book|watch|travel|stay|drive|order|"
            rf"check|use|do)\b{_VALUE_CHAR}*?){_STOP}",
            needs=("never",),
        ),
        "dislikes",
        True,
    ),
    (
        _p(
            rf"\bi always (?P<v>(?:eat|drink|fly|sit|take|book|travel|stay|order|get|choose|pick"
            rf"|ask for|go for|use)\b{_VALUE_CHAR}*?){_STOP}",
            needs=("i always",),
        ),
        "prefers",
        False,
    ),
    (
        _p(
            rf"\bi(?:'m| am) {_ADV}(?:so |totally |completely )?obsessed with {V}",
            needs=("obsessed with",),
        ),
        "likes",
        False,
    ),
    (
        # "I'm a window seat person", "I'm more of a PvE person".
        _p(
            r"\bi(?:'m| am) (?:more of |much more of |definitely |totally )?(?:an? )"
            r"(?P<v>(?!(?:people|nice|good|bad|different|real|private|busy)\b)[\w'-]+"
            r"(?: [\w'-]+){0,2}?) person\b",
            needs=(" person",),
        ),
        "prefers",
        False,
    ),
    (
        _p(
            rf"\b(?:i'm |i am |i will )?never (?:flying|flying with|booking|booking with|using"
            rf"|eating at|staying at|shopping at|going back to) {V}",
            needs=("never",),
        ),
        "dislikes",
        True,
    ),
    (_p(rf"^no {_VM} for me\b"), "dislikes", True),
    (
        _p(
            rf"^{_VM} (?:works?|is|would be) (?:best|better|ideal|perfect) for me\b",
            needs=("for me",),
        ),
        "prefers",
        False,
    ),
    (_p(rf"^{_VM} suits me\b", needs=("suits me",)), "prefers", False),
]

# --- facts about oneself -------------------------------------------------------------------
_NAME_WORD = r"[A-Z][a-z'-]+(?: [A-Z][a-z'-]+)?"
NOT_NAMES = {
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
NAME_PATTERNS = [
    _p(rf"\bmy name(?:'s| is) (?P<v>{_NAME_WORD})", 0, needs=("my name",)),
    _p(
        rf"\b(?:[Cc]all me|[Ii]t's|[Tt]his is) (?P<v>{_NAME_WORD})\s*(?:[,.!]|$)",
        0,
        needs=("call me", "it's", "this is"),
    ),
    _p(
        rf"\b[Ii](?:'m| am) (?P<v>{_NAME_WORD})\b(?!\s+(?:member|user|customer|client))",
        0,
        needs=("i'm", "i am"),
    ),
]
_DIETS = (
    r"vegetarian|vegan|pescatarian|kosher|halal|gluten[- ]free|lactose[- ]intolerant|coeliac"
    r"|celiac|teetotal|diabetic|dairy[- ]free|nut[- ]free"
)
FACT: list[tuple[re.Pattern[str], str]] = [
    (_p(rf"\bi(?:'m| am) {_ADV}allergic to {V}", needs=("allergic to",)), "allergy"),
    (
        _p(
            rf"\bi (?:have|'ve got|got) (?:an? |a severe |a bad )?{_VM} allergy\b",
            needs=("allergy",),
        ),
        "allergy",
    ),
    (
        _p(rf"\bi (?:can't|cannot|cant) (?:eat|have) {V}", needs=("can't", "cannot", "cant")),
        "allergy",
    ),
    (
        _p(
            rf"\bi(?:'m| am) (?P<no>not |no longer )?(?:a |an )?(?:strict )?(?P<v>{_DIETS})\b",
            needs=(
                "vegetarian",
                "vegan",
                "pescatarian",
                "kosher",
                "halal",
                "gluten",
                "lactose",
                "coeliac",
                "celiac",
                "teetotal",
                "diabetic",
                "dairy",
                "nut",
            ),
        ),
        "diet",
    ),
    (_p(rf"\bi {_ADV}(?:live|reside) in {V}", needs=("live in", "reside in")), "lives_in"),
    (
        _p(
            rf"\bi(?:'m| am) (?:currently )?(?:based|located|living|staying) in {V}",
            needs=("based in", "located in", "living in", "staying in"),
        ),
        "lives_in",
    ),
    (
        _p(
            r"(?:^|\bwe(?:'re| are| have|'ve) |[,;] )(?:(?:just|recently|now"
            rf"|currently) )?(?:based in|located in|moved to|relocated to) {V}",
            needs=("based in", "located in", "moved to", "relocated to"),
        ),
        "lives_in",
    ),
    (_p(rf"\bi (?:just )?moved to {V}", needs=("moved to",)), "lives_in"),
    (
        _p(
            r"\b[Ii](?:'m| am) (?:now |currently )?in (?P<v>[A-Z][\w'-]+(?: [A-Z][\w'-]+)?)\b",
            0,
            needs=("i'm in", "i am in", "now in", "currently in"),
        ),
        "lives_in",
    ),
    (
        _p(
            r"\b[Ii](?:'m| am) on (?P<v>[A-Z][\w-]*(?: [A-Z][\w-]*)? time)\b",
            0,
            needs=(" time",),
        ),
        "timezone",
    ),
    (
        _p(
            rf"\bi (?:currently )?work (?:at|for) {_VALUE_CHAR}+? as (?:an? |the )?{V}",
            needs=("work at", "work for"),
        ),
        "role",
    ),
    (_p(rf"\bi(?:'m| am) (?:originally )?from {V}", needs=("from",)), "from"),
    (_p(rf"\bi (?:currently )?work (?:at|for) {V}", needs=("work at", "work for")), "works_at"),
    (
        _p(
            rf"\bi(?:'m| am) (?:currently )?(?:working|employed) (?:at|for) {V}",
            needs=("working", "employed"),
        ),
        "works_at",
    ),
    (_p(rf"\bi (?:currently )?work as (?:an? |the )?{V}", needs=("work as",)), "role"),
    (
        _p(
            rf"\b[Ii](?:'m| am) (?:currently )?(?:an?|the) (?:[a-z][\w-]* ){{1,3}}at"
            rf" (?=[A-Z]){V}",
            0,
            needs=("i'm", "i am"),
        ),
        "works_at",
    ),
    (
        _p(
            r"\bi(?:'m| am) (?:currently )?(?:an?|the|your) (?!(?:big|huge|great) fan|bit|little"
            r"|lot|few|couple|fan)(?P<v>[a-z][\w -]*?(?:er|or|ist|ian|ant|ent|ee|member|manager"
            r"|lead|head|owner|founder|admin|dev|pm|analyst|coach|chef|nurse|doctor|student|intern"
            r"|consultant|architect|sre|cto|ceo|cfo|vp|user|customer|parent|mom|dad|teacher))\b",
            needs=("i'm", "i am"),
        ),
        "role",
    ),
    (
        _p(
            rf"\b(?:i|we) (?:usually |always |currently |mostly )?(?:deploy|ship|push) to {V}",
            needs=("deploy to", "ship to", "push to"),
        ),
        "deploys_to",
    ),
    (
        _p(
            rf"\b(?:i|we)(?:'re| are)? (?:currently |mostly |personally )?(?:use|using) {V}",
            needs=("use", "using"),
        ),
        "uses",
    ),
    (
        _p(
            rf"\b(?:i|we)(?:'re| are)? (?:currently |mostly )?(?:run|running|on) {V}"
            r"(?<=\d)",
            needs=("run", "on "),
        ),
        "runs",
    ),
    (_p(rf"\b(?:i|we) (?:currently |mostly )?run {V}", needs=("run ",)), "runs"),
]
MY_X = _p(
    # The attribute ends before a relative clause: "my flight that's scheduled for ..." says
    # nothing of a "flight that". "Our" is the speaker's too ("our landlord is Mr. Díaz"),
    # "your" the other party's, and a name's its bearer's ("Nadia's extension is 4417").
    rf"\b(?P<whose>my|our|your|[A-Z][a-z]+'s) (?P<x>[A-Za-z][\w'-]*(?: (?!(?:that|which"
    rf"|who|and|or)\b)[a-z][\w'-]*){{0,3}}?)(?P<sep> is|'s| are|:| =|, it's| - it's) {V}",
    needs=("my", "our", "'s"),
)
# "my sister Chiara", "my daughter Emma": a relation named.
KIN_NAMED = _p(
    r"\bmy (?P<x>sister|brother|daughter|son|wife|husband|partner|mum|mom|dad|mother|father|boss"
    r"|manager|dog|cat|kid|niece|nephew|cousin|uncle|aunt|grandma|grandpa|flatmate|roommate)"
    r" (?P<v>[A-Z][a-z'-]+)\b(?!')",
    needs=("my ",),
)
# What may come before "my" when "my X's" opens its clause ("Oh, my wife's a nurse"); after
# anything else it is a possessive ("I love my wife's brownies"), not "is".
CLAUSE_OPENING = re.compile(
    r"^(?:[\s,;:.!?-]*(?:and|but|so|because|since|also|well|oh|ok|okay|yes|yeah|no|actually|"
    r"btw|plus|then|now|anyway|fyi|hi|hey)\b)*[\s,;:.!?-]*$",
    I,
)
KNOWN_ATTRS = re.compile(
    r"favou?rite|email|phone|number|birthday|timezone|time zone|address|budget|rate|limit|title|"
    r"manager|team|boss|id\b|account|handle|username|quota|tier|plan|status|language|pronouns|"
    r"seat|diet|airport|hometown|city|wife|husband|partner|daughter|son|dog|cat|deadline|"
    r"salary|code|region|stack|editor|distro|version|home dir|level|membership|class|landlord"
    r"|landlady|vet|doctor|dentist|gp\b|school|mobile|extension|employer|company|lawyer"
    r"|accountant|postcode|zip",
    I,
)
STATE_WORDS = re.compile(
    r"^(?:down|up|broken|slow|dead|fine|ok|okay|gone|useless|not|too|so|very|really|a mess|already|"
    r"hanging|working|stuck|running|still|kinda|pretty|quite|being|getting|going|on|off|in|at"
    r"|that|if|whether|because|listed|shown|set)\b",
    I,
)

# --- agreements, commitments, closures -----------------------------------------------------
# A way to pay chosen there and then ("I'll use the Visa ending in 6437 for the remaining
# amount", "I'll cover any remaining amount with my 7447 card"): a choice the conversation
# settles, not work the speaker owes. Only with a word that names a means of payment: "I'll use
# the staging cluster for the load test" is a plan.
_PAYMENT = (
    r"(?:card|visa|mastercard|amex|american express|debit|credit|certificate|voucher"
    r"|gift ?cards?|paypal|apple pay|google pay|points|miles|cash|payment method"
    r"|form of payment|account ending)"
)
_PAY_VERB = (
    r"(?:use|pay (?:with|using|by|via)|pay for (?:it|this|that|the \w+) (?:with|using|by)"
    r"|put (?:it|this|that|the \w+) on|cover (?:[\w$,.]+ ){0,4}?with)"
)
# What is paid with, up to the word naming it, within one clause.
_PAY_OBJECT = rf"(?:(?!\b(?:but|because|since|if|unless)\b)[^,;!?()])*?\b{_PAYMENT}\b"
PAID_WITH = _p(
    r"\b(?:i'll|i will|i'd like to|i would like to|i want to"
    r"|we'll|we will|let's|please)\s+(?:just |also |then )?"
    rf"{_PAY_VERB}\s+(?P<v>{_PAY_OBJECT}{_VALUE_CHAR}*?)" + _STOP,
    needs=("use", "pay", "put ", "cover"),
)
# "net-45 it is", "Tuesday it is": a choice named in a few words. What comes before "it is" in
# "I don't know what it is", "as it is" or "yes it is" is a clause, not a choice (rules.py
# keeps a value of at most CHOICE_WORDS_AT_MOST words without a CLAUSE_WORD).
CHOSEN_IT_IS = _p(rf"^{_VM} it is\s*[.!]*$", needs=(" it is",))
AGREE = [
    _p(
        rf"\bwe(?:'re| are|'ll| will)? (?:all )?(?:going|go) with {V}",
        needs=("going with", "go with"),
    ),
    _p(
        rf"\bwe(?:'re| are)? (?:standardi[sz]ing|settling|switching(?: \w+)? to|moving(?: \w+)? to)"
        rf" (?:on )?{V}",
        needs=("standardi", "settling", "switching", "moving"),
    ),
    _p(rf"\bwe(?:'ve)? (?:picked|chose|chosen|voted for) {V}", needs=("picked", "chose", "voted")),
    _p(
        rf"\b(?:we(?:'re| are) all|everyone(?:'s| is| has)) agreed(?: on)?\s*[:,]?\s+(?:on )?{V}",
        needs=("agreed",),
    ),
    _p(rf"^(?:ok(?:ay)?,? )?(?:final answer,? )?{_VM} works for everyone\b", needs=("everyone",)),
    _p(
        rf"\bwe(?:'ve| have)? (?:all |finally |just )?(?:settled|agreed|decided|landed|aligned)"
        rf" (?:on|upon) {V}",
        needs=("ed on", "ed upon"),
    ),
    _p(
        rf"\bwe(?:'ve| have)? (?:all |finally |just )?agreed (?:to|that) {V}",
        needs=("agreed to", "agreed that"),
    ),
    _p(rf"^(?:agreed|confirmed|decision|final|settled|decided)\s*[:\-]\s*{V}"),
    # "Decided in standup: code freeze starts Dec. 18", "final call: we go with ...".
    _p(rf"^(?:decided|decision|agreed|settled|final call|final answer)\b[^:]{{0,40}}:\s*{V}"),
    _p(rf"^(?:i(?:'m| am) |just )?confirming (?:that |the )?{V}"),
    _p(rf"^(?:let's|lets|let us) (?:go with|go for|stick with|settle on|lock in|do|book) {V}"),
    _p(
        rf"\b(?:i'll|i will|we'll|we will|i'm going to) (?:just )?(?:go|stick) with {V}",
        needs=("go with", "stick with"),
    ),
    CHOSEN_IT_IS,
    PAID_WITH,
]
CHOICE_WORDS_AT_MOST = 4
# A choice that only points back at a list said before ("the first option", "Option 2") names
# nothing a later reader could use by itself; what a comma puts after it may (APPOSITION).
POINTED_CHOICE = re.compile(
    r"^(?:the )?(?:(?:first|second|third|fourth|last|other|former|latter|\d+(?:st|nd|rd|th)?)"
    r" (?:option|one|choice|plan)|(?:option|choice|plan) (?:#\s*)?(?:\d+|[a-d]|one|two|three))$",
    I,
)
# What a comma puts after a choice to name it: "the first option, Flight HAT136".
# Not "the first option, please": courtesy after a comma names nothing.
APPOSITION = re.compile(
    r"\s*,\s*(?=\S)(?!(?:please|pls|thanks|thank you|then|too|though|now|for now)\b)"
    rf"(?P<v>{_VALUE_CHAR}+?)\s*(?:{_CLAUSE_COMMA}|[;!?()]|\.(?:\s|$)|$)",
    I,
)
CLAUSE_WORD = re.compile(
    r"\b(?:i|you|he|she|we|they|it|this|that|what|how|which|who|why|where|when|if|as|then|"
    r"sure|know|yes|yeah|no|not|cause|because|do|don't|dont|care)\b",
    I,
)
DEAL = _p(r"^(?:it's a |that's a |ok(?:ay)?,? |fine,? |sounds good,? )?deal\s*[.!]*$")
COMMIT = _p(
    r"\b(?:i'll|i will|ill|i'm going to|i am going to|i'm gonna|im gonna|i shall|let me|i promise"
    r" to|i can have|i'm on it,? i'll)\s+(?:definitely |also |just |quickly |then |now |still "
    r"|first |personally |gladly |happily |make sure to )*(?P<rest>[^!?;()]+)",
    needs=("ill", "i'll", "going to", "gonna", "i shall", "let me", "i promise to", "i can have"),
)
NOT_COMMIT = _p(
    r"^(?:be(?! (?:in touch|there|back|sending|sharing))|need|have(?! (?:it|that|them|the)\b)"
    r"|take (?:that|it|this) as|try\s*$|see\s*$|know|think|say|bet|admit|guess|miss|pass|wait"
    r"|go with|stick with|stick to|just|get right on|die|kill|tell you what|never)\b"
    # A way to pay chosen (PAID_WITH), not a promise.
    rf"|^{_PAY_VERB}\s+{_PAY_OBJECT}"
)
# Where a report of something done may start: the sentence's start, or after a comma or "and"
# when "I've" says it ("we're going with Bella Napoli, I've booked a table"), not inside a
# condition. Two patterns each: unanchored, the first form made the search try every position.
_DONE_AT = ("^(?:i(?:'ve| have)? )?", r"(?:[,;] (?:and )?|\band )i(?:'ve| have) ")
# Whom a thing done was given to, before the thing: "I've emailed you a prepaid label".
_TO_WHOM = r"(?:(?:you|them|him|her|everyone) (?=\w))?"
# What a thing is when it is done, said of the thing: "your refund has been issued".
_DONE_STATES = (
    "done",
    "finished",
    "sent",
    "completed",
    "complete",
    "shipped",
    "merged",
    "submitted",
    "delivered",
    "sorted",
    "issued",
    "filed",
    "processed",
    "paid",
    "booked",
    "approved",
    "resolved",
    "received",
    "recieved",
    "frozen",
    "applied",
    "renewed",
    "scheduled",
    "arranged",
    "deployed",
    "published",
    "signed",
    "refunded",
    "updated",
)
_DONE_STATE = "|".join(_DONE_STATES)
# What the speaker says they did, and did already.
_DID = (
    "sent",
    "shared",
    "emailed",
    "uploaded",
    "pushed",
    "submitted",
    "finished",
    "completed",
    "delivered",
    "posted",
    "attached",
    "shipped",
    "fixed",
    "merged",
    "filed",
    "wrapped up",
    "done with",
    "taken care of",
    "sorted",
    "applied",
    "added",
    "updated",
    "renewed",
    "scheduled",
    "arranged",
    "refunded",
    "issued",
    "processed",
    "signed and returned",
    "returned",
    "resolved",
    "approved",
)
_BOOKED = ("booked", "reserved", "paid", "ordered", "cancelled", "canceled")
# Said of the thing: "your refund of $312.40 has been issued", "INC-2291 is resolved". A
# subject holding a clause word ("I hope the situation is resolved") is no thing done (rules.py).
DONE_SAID_OF = _p(
    rf"^(?:(?:done|all set)\W+)?(?:the |my |your |our )?{_VM} (?:is|are|has been|have been)"
    rf" (?:now |all |just |already |successfully )?(?:{_DONE_STATE})\b"
    r"(?! (?:by|until|on|for)\b)",
    # Three literals, not the states: a long prefilter costs more than the search it saves.
    needs=(" is ", " are ", " been "),
)
# "the referral has gone out", "Q4 payment went out this morning": sent, said of the thing.
GONE_OUT = _p(rf"^(?:the |my |your |our )?{_VM} (?:went|has gone|have gone) out\b", needs=(" out",))
CLOSE = [
    *(
        _p(
            rf"{at}(?:just |already |finally |now )?(?:{'|'.join(_DID)})"
            rf" {_TO_WHOM}(?!(?:you|it|that|to|by|for|on|at|in|from|yourself|myself"
            rf"|themselves)\b){V}",
            needs=() if at.startswith("^") else ("i've", "i have"),
        )
        for at in _DONE_AT
    ),
    *(
        _p(
            rf"{at}(?:{'|'.join(_BOOKED)}) {_TO_WHOM}(?!you\b|it\b|that\b){V}",
            needs=_BOOKED,
        )
        # "I booked" alone may be a plan read back; "I've booked", "just booked" report it.
        for at in (r"^(?:i(?:'ve| have) |just |already )+", _DONE_AT[1] + "(?:just |already )*")
    ),
    _p(rf"^here(?:'s| is| are) (?P<v>(?:the|your|my|our) {_VALUE_CHAR}+?){_STOP}"),
    DONE_SAID_OF,
    GONE_OUT,
]
BARE_DONE = _p(
    r"^(?:all |it's |that's |and |its )?(?:done|finished|completed|sorted"
    r"|taken care of)(?: and dusted)?\s*[.!]*$"
)
CANCEL = _p(
    r"^(?:never\s*mind|nvm|scratch that|forget (?:it|that|about it|about that)|cancel that"
    r"|disregard that|ignore that|no longer needed)\b"
)
NEED = _p(rf"\b(?:i|we) (?:don't|do not|no longer) need(?: to)? (?:the )?{V}")
CANCEL_X = _p(rf"^(?:no need to|(?:i|we) no longer need(?: to)?|don't bother with) {V}")

# --- claims about someone else ("you prefer", "Sarah is allergic to") ----------------------
OTHER = _p(
    rf"(?:^|[\s,])(?P<who>(?i:you)|@[\w.-]+|[A-Z][a-z]+)\s+(?i:(?:really |also |definitely )?"
    rf"(?P<verb>prefers?|likes?|loves?|enjoys?|hates?|dislikes?|can't stand|(?:doesn't|does not"
    rf"|don't|do not) (?:like|want|eat)|(?:is|are|'re) allergic to|lives? in|works? (?:at|for)"
    rf"|(?:is|are|'re) (?:based|located) in)) {V}",
    0,
    needs=(
        "prefer",
        "like",
        "love",
        "enjoy",
        "hate",
        "stand",
        "want",
        " eat",
        "allergic",
        "live",
        "work",
        "based",
        "located",
    ),
)
# Traits said of someone else: "Sam is halal", "Tom's vegetarian", "you're a Gold member",
# "you're on our Fibre 500 plan" (the plan's or tier's name is the value).
TRAITS: list[tuple[re.Pattern[str], str]] = [
    (
        _p(
            rf"(?:^|[\s,])(?P<who>(?i:you)|@[\w.-]+|[A-Z][a-z]+)(?:'s|'re| is| are)"
            rf" (?i:(?:also |strictly |now )?(?:an? )?)(?P<v>(?i:{_DIETS}))\b",
            0,
            needs=("'s ", "'re ", " is ", " are "),
        ),
        "diet",
    ),
    (
        _p(
            r"(?:^|[\s,])(?P<who>(?i:you)|I|@[\w.-]+|[A-Z][a-z]+)(?:'re| are| is|'s|'m| am)"
            r" (?i:an? |on (?:the |our |a |an )?)(?P<v>[A-Z][\w+&-]*(?: [A-Z0-9][\w+&-]*){0,3})"
            r" (?i:member|plan|account|customer|subscriber|tier)\b",
            0,
            needs=("member", "plan", "account", "customer", "subscriber", "tier"),
        ),
        "membership",
    ),
]
OTHER_VERB: dict[str, tuple[MemoryKind, str, bool]] = {
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
# A look-up is done when it is promised; a date after it is the date of what is looked up ("I'll
# search for flights on May 24"), not a deadline. Said with "by" ("by Friday") or alone ("look
# into it tomorrow"), it says when.
LOOKUP_VERB = _p(rf"^(?!check in\b)(?:{'|'.join(LOOKUP_VERBS)})\w*\b")
DATE_OF_THING = _p(r"^\s*(?:on|for)\b")
DUE = _p(
    r"\s*\b(?:by|before|until|on|due|no later than|for)?\s*(?P<d>end of (?:the )?(?:day|week|month)"
    r"|eod|eow|cob|tomorrow(?: morning| afternoon| evening| night)?|tonight|today|later today"
    r"|this (?:afternoon|evening|morning|week(?:end)?)|next (?:week|month|\w+day)"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day(?: morning| afternoon| evening| eod)?"
    r"|noon|midnight|\d{1,2}(?::\d{2})?\s?(?:am|pm)|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct"
    r"|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar"
    r"|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|the \d{1,2}(?:st|nd|rd|th)|\d{4}-\d{2}-\d{2}"
    r"|in (?:a |an |\d+ |two |three )?(?:days?|hours?|weeks?|minutes?))\b"
)
