"""The recall benchmark's sets (bench/recall.py): which conversations go into memory, as turn
events, and which questions are asked of it, each with the message ids that answer it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import longconv, taucustomer
from bench.shared import json_lines, shared_data_dir
from bench.syncload import agent_participant
from pipeline.ingest import ingest_turns
from pipeline.trust import DirectoryTrustPolicy
from pipeline.validate import validate_event
from schemas.event import SCHEMA_VERSION
from schemas.records import SyncJob
from tests.datasets import (
    FRIENDSQA_FILE,
    TESTS_DATA_DIR,
    RawEvent,
    friends_raw_event,
    friends_scenes,
    slug,
)

PARAPHRASES = Path(__file__).resolve().parent / "data" / "paraphrases.jsonl"
CUSTOMER_MEMORY = Path(__file__).resolve().parent / "data" / "customer_memory.jsonl"
# A second customer-memory set by another blind author, written after the first had been used
# to design ranking (so the first is in-sample since 2026-12-04; this one is held out).
CUSTOMER_MEMORY_B = Path(__file__).resolve().parent / "data" / "customer_memory_b.jsonl"
# A third, by a third blind author (2026-12-04), written when the second had been measured
# while ranking changed: held out, run only to report.
CUSTOMER_MEMORY_C = Path(__file__).resolve().parent / "data" / "customer_memory_c.jsonl"
# A fourth (2026-12-05), written blind after the third had been measured once: its author was
# asked to vary who states the answer (customer, agent, a second human), which the third set
# had shown to matter. Held out, run only to report.
CUSTOMER_MEMORY_D = Path(__file__).resolve().parent / "data" / "customer_memory_d.jsonl"
# A fifth (2026-12-06), written blind in the plain style of the issue's own reference set
# (ordinary multi-topic sessions, details mentioned in passing, no planted decoys), where the
# third and fourth plant same-type distractors and late corrections. Held out, run only to
# report.
CUSTOMER_MEMORY_E = Path(__file__).resolve().parent / "data" / "customer_memory_e.jsonl"
# A sixth (2026-12-07), written blind in the shape the issue's reference implies (plain BM25's
# first message answers most of its questions): ordinary sessions, and memory searches typed in
# the conversation's own words ("seat preference"), short phrases or questions. Held out, run
# only to report.
CUSTOMER_MEMORY_F = Path(__file__).resolve().parent / "data" / "customer_memory_f.jsonl"
# A seventh (2026-12-07), written blind in the third and fourth sets' style (same-type
# distractors, late corrections, choices among offers) as a design set: its misses may be read
# while designing ranking rules, so its figures are in-sample.
CUSTOMER_MEMORY_G = Path(__file__).resolve().parent / "data" / "customer_memory_g.jsonl"
# An eighth (2026-12-07), written blind: a returning customer. Each case's question is the first
# message the customer sends when they come back days later in the same channel, which needs
# something said in the earlier conversation: what `build_context` is asked on a platform (the
# customer's latest message as the query, in their channel). Held out, run only to report.
CUSTOMER_MEMORY_H = Path(__file__).resolve().parent / "data" / "customer_memory_h.jsonl"
FRIENDS_TENANT = "bench-friends"
PARA_TENANT = "bench-para"
CUSTOMER_TENANT = "bench-customer"
CUSTOMER_B_TENANT = "bench-customer-b"
CUSTOMER_C_TENANT = "bench-customer-c"
CUSTOMER_D_TENANT = "bench-customer-d"
CUSTOMER_E_TENANT = "bench-customer-e"
CUSTOMER_F_TENANT = "bench-customer-f"
CUSTOMER_G_TENANT = "bench-customer-g"
CUSTOMER_H_TENANT = "bench-customer-h"
CUSTOMER_TAU_TENANT = "bench-customer-tau"
LONG_TENANT = "bench-long"
PARA_AGENT = "a-memory"
# Speakers of the paraphrase set that are agents on the platform (they speak as `ai`).
PARA_AGENT_SPEAKERS = frozenset({"Support Bot", "Travel Agent"})
# The third customer set names its agent differently in every case.
CUSTOMER_C_AGENT_SPEAKERS = frozenset(
    {
        "Admissions Assistant", "AquaServe Assistant", "BagTrack Assistant", "BankBuddy",
        "CardCare Assistant", "CargoBot", "Catering Concierge", "ClaimAssist", "Claims Bot",
        "ClubLink", "DriveNow Concierge", "EventDesk", "FiberLine Support", "FitClub Assistant",
        "Freight Desk", "Furnish Support", "HomeStore Help", "LicenseDesk",
        "Licensing Helpdesk", "Mobi Assistant", "MoveMate", "NetAssist", "OrthoCare Assistant",
        "Party Catering Bot", "PetCare Assistant", "Pharmacy Assistant", "PowerLine Assistant",
        "RelocateBot", "RentalCare", "Reservations Bot", "RxHelper", "SkyHelp", "SmileDesk",
        "Stay Concierge", "TaxBuddy", "TaxPrep Assistant", "TelcoCare", "Uni Enquiries",
        "Venue Assistant", "VetLine",
    }
)  # fmt: skip
# The fourth set's agents: every case's own, each name ending in Assistant, Bot, Concierge,
# Desk, Support or Helper.
CUSTOMER_D_AGENT_SPEAKERS = frozenset(
    {
        "BoxMaster Movers Concierge", "BrightSmile Dental Helper", "Brightwater Energy Bot",
        "CareWell Pharmacy Assistant", "Cedar Hill Vet Assistant", "Clearstream Water Helper",
        "CloudNest Billing Assistant", "Cobalt Insurance Helper", "Equator Air Support",
        "FixRight Home Helper", "Glasshouse Venues Concierge", "Golden Ladle Catering Concierge",
        "HandyHub Repair Support", "Harborview Hotel Concierge", "Haven Insurance Concierge",
        "IronPeak Fitness Support", "Keystone Credit Union Assistant",
        "Lakeshore University Admissions Desk", "LedgerLine Tax Assistant",
        "Lumen Home Returns Helper", "Maple Grove Leasing Helper", "MediQuick Pharmacy Bot",
        "Northgate Bank Assistant", "Orchard Family Dental Desk", "Parkline Residences Assistant",
        "Pawsitive Vet Desk", "Pulse Fibre Support", "PulseFit Member Helper",
        "Riverside Pavilion Events Desk", "RoadRunner Rentals Desk", "Saffron Table Catering Bot",
        "Seabreeze Resort Desk", "SkyLark Airways Assistant", "Stackly Billing Support",
        "SwiftHaul Moving Desk", "TaxTrail Filing Support", "Threadline Returns Support",
        "Velo Car Hire Bot", "Vireo Mobile Support", "Westbrook Admissions Helper",
    }
)  # fmt: skip
# The sixth set's agents: an assistant of each domain.
CUSTOMER_F_AGENT_SPEAKERS = frozenset(
    {
        "Baggage Assistant", "Bank Assistant", "Booking Assistant", "Broadband Assistant",
        "Catering Assistant", "Clinic Assistant", "Course Advisor", "Energy Assistant",
        "Enrolment Assistant", "Florist Assistant", "Gym Assistant", "Home Services Assistant",
        "IT Helpdesk", "Insurance Assistant", "Moving Assistant", "Nursery Assistant",
        "Pharmacy Assistant", "Rail Assistant", "Rental Assistant", "Repair Assistant",
        "Reservation Assistant", "Roadside Assistant", "Service Assistant", "Support Bot",
        "Ticket Assistant", "Travel Agent", "Vet Assistant", "Water Support Bot",
    }
)  # fmt: skip
# The seventh set's agents: every case's own.
CUSTOMER_G_AGENT_SPEAKERS = frozenset(
    {
        "Aeroboreal Baggage Assistant", "Ardent Claims Bot", "Basketful Assistant",
        "Brightwave Mobile Assistant", "Carry & Co Removals Bot", "Clearwater Energy Assistant",
        "Cloudnest Billing Assistant", "Corvane IT Service Desk", "Crestline Bank Assistant",
        "DriveAway Rentals Assistant", "Eastvale Council Assistant", "FibreNet Assistant",
        "FixRight Appliance Assistant", "FreshCart Assistant", "Gatehouse Tickets Assistant",
        "GovServices Passport Helper", "Harbour View Hotel Concierge", "Harbourline Claims Bot",
        "Helix IT Helpdesk Bot", "Hillside Surgery Assistant", "Lakeshore Lodge Reservations",
        "Lumen Bank Assistant", "Meadowbank Primary Office Assistant", "Meridian Air Assistant",
        "Northfield Council Parking Assistant", "Northgate Bank Assistant",
        "Oakridge Home Delivery Bot", "Pawsome Vets Reception Bot",
        "PulseFit Membership Assistant", "QuickFix Repairs Assistant", "Riverside Clinic Desk",
        "Riverside College Admissions Assistant", "SkyLark Airways Assistant",
        "Smile Studio Dental Desk", "SwiftMove Booking Bot", "Tallyboard Billing Assistant",
        "TicketHaven Support Bot", "Tidewell Water Assistant", "Voyager Cover Claims Bot",
        "Willow Vets Assistant",
    }
)  # fmt: skip
# The eighth set's agents are named by a rule its author was given.
CUSTOMER_H_AGENT_SUFFIX = " Assistant"
SPLITS = ("dev", "test", "all")
SETS = (
    "friends",
    "paraphrases",
    "customer",
    "customer-b",
    "customer-c",
    "customer-d",
    "customer-e",
    "customer-f",
    "customer-g",
    "customer-h",
    "customer-tau",
    "long",
)


@dataclass(frozen=True)
class Case:
    """One question put to one agent's memory, with the message ids that answer it."""

    agent: str
    question: str
    gold: frozenset[str]
    kind: str = ""  # the question's type where the set gives one (single, when, multi, ...)


@dataclass
class Corpus:
    """Events to load, and the questions to ask of them."""

    name: str
    tenant: str
    events: list[RawEvent]
    cases: list[Case]
    notes: list[str] = field(default_factory=list)


# --- data ------------------------------------------------------------------------------------


def data_root(given: Path | None) -> tuple[Path, str | None]:
    """The data tree to read, and a note when it is only the vendored slice."""
    slice_note = (
        "reading the small vendored slice in tests/data: these figures are not comparable "
        "with the full FriendsQA dev set"
    )
    if given is not None:
        return given, slice_note if given.resolve() == TESTS_DATA_DIR else None
    try:
        return shared_data_dir(), None
    except FileNotFoundError:
        return TESTS_DATA_DIR, f"../shared/data is absent; {slice_note}"


def scene_half(title: str) -> str:
    """The half ("dev" or "test") a scene's questions belong to: the low bit of a hash of its
    title, so the split is fixed, even-ish and blind to the content."""
    return "dev" if hashlib.sha256(title.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def friends_corpus(
    root: Path, agents: int, limit: int | None, split: str = "all", *, one_channel: bool = False
) -> Corpus:
    """FriendsQA scenes as group channels: scene i is observed by agent i mod n, every other
    scene by the next agent too; a question is asked of each agent that observed its scene, if
    the scene is in `split` (every scene is in memory whatever the split). `one_channel`: every
    scene is said in one channel, one after another, so each agent remembers one long
    conversation and no channel boundary tells the scenes apart."""
    scenes = friends_scenes(root)
    data = json.loads((root / FRIENDSQA_FILE).read_text(encoding="utf-8"))
    paragraphs = [p for episode in data["data"] for p in episode["paragraphs"]]
    assert len(paragraphs) == len(scenes)
    events: list[RawEvent] = []
    cases: list[Case] = []
    unanswerable = 0
    count = len(scenes) if limit is None else min(limit, len(scenes))
    for position in range(count):
        scene, qas = scenes[position], paragraphs[position]["qas"]
        raw = friends_raw_event(scene, position)
        raw["tenant"] = FRIENDS_TENANT
        if one_channel:
            raw["channel"] = {"id": "friends", "kind": "group", "title": "Friends"}
        observers = [position % agents]
        if position % 2 and agents > 1:
            observers.append((position + 1) % agents)
        raw["participants"] = [*raw["participants"], *(agent_participant(n) for n in observers)]
        events.append(raw)
        said = {m["id"] for m in raw["messages"] if (m["content"] or "").strip()}
        if split != "all" and scene_half(scene["title"]) != split:
            continue
        for qa in qas:
            gold = {f"{scene['title']}-u{a['utterance_id']}" for a in qa["answers"]} & said
            if not gold:
                unanswerable += 1
                continue
            cases.extend(Case(f"a-{n}", qa["question"], frozenset(gold)) for n in observers)
    notes = [f"{count} scenes, {agents} agents, {unanswerable} questions without a kept answer"]
    name = "FriendsQA dev (in-sample)" if split == "all" else f"FriendsQA dev, {split} half"
    if one_channel:
        name += ", every scene in one channel"
    return Corpus(name, FRIENDS_TENANT, events, cases, notes)


def case_event(
    tenant: str,
    channel: str,
    position: int,
    said: Sequence[tuple[str, str]],
    agents: frozenset[str],
    calls: Mapping[int, list[dict[str, Any]]] | None = None,
) -> RawEvent:
    """One conversation of a blind set as a turn event: its own group channel, `said` as
    (speaker, text) in order, `agents` naming the speakers that are agents on the platform, and
    the memory agent observing; message i's id is f"{channel}-m{i}", and it carries the tool
    calls `calls` gives it."""
    people: dict[str, dict[str, Any]] = {}
    messages: list[dict[str, Any]] = []
    for index, (name, text) in enumerate(said):
        kind = "agent" if name in agents else "human"
        pid = f"{kind[0]}-{slug(name)}"
        people.setdefault(
            pid, {"id": pid, "kind": kind, "display_name": name, "handle": slug(name)}
        )
        messages.append(
            {
                "id": f"{channel}-m{index}",
                "role": "ai" if kind == "agent" else "human",
                "sender_id": pid,
                "content": text,
                "created_at": f"2026-02-{1 + position // 24:02d}T{position % 24:02d}:"
                f"{index // 60:02d}:{index % 60:02d}Z",
                **({"tool_calls": calls[index]} if calls and index in calls else {}),
            }
        )
    people[PARA_AGENT] = {
        "id": PARA_AGENT,
        "kind": "agent",
        "display_name": "Memory",
        "handle": "memory",
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": f"{tenant}-{channel}",
        "tenant": tenant,
        "channel": {"id": channel, "kind": "group", "title": channel},
        "participants": list(people.values()),
        "messages": messages,
    }


def speakers_ending(path: Path, suffix: str) -> frozenset[str]:
    """The speakers of a blind set's file whose names end in `suffix` (its agents, for a set
    whose author named them by that rule)."""
    return frozenset(
        message["speaker"]
        for case in json_lines(path)
        for message in case["messages"]
        if message["speaker"].endswith(suffix)
    )


def paraphrase_corpus(
    path: Path = PARAPHRASES,
    title: str = "paraphrases (blind)",
    tenant: str = PARA_TENANT,
    agents: frozenset[str] = PARA_AGENT_SPEAKERS,
) -> Corpus:
    """A blind set of cases (the paraphrases, or a customer-memory set of the same shape):
    every case its own group channel, all observed by one agent; `agents` names the speakers
    that are agents on the platform."""
    events: list[RawEvent] = []
    cases: list[Case] = []
    for position, case in enumerate(json_lines(path)):
        said = [(message["speaker"], message["text"]) for message in case["messages"]]
        events.append(case_event(tenant, case["id"], position, said, agents))
        gold = frozenset(f"{case['id']}-m{i}" for i in case["answer"])
        cases.append(Case(PARA_AGENT, case["question"], gold))
    return Corpus(title, tenant, events, cases, [f"{len(cases)} cases"])


def tau_corpus(root: Path, path: Path = taucustomer.CUSTOMER_MEMORY_TAU) -> Corpus:
    """tau-bench's airline conversations (trial 0 of each task, each its own channel, one
    agent remembering them all) and the blind questions asked of them."""
    said = taucustomer.conversations(root)
    events = [
        case_event(
            CUSTOMER_TAU_TENANT,
            f"tau-{task}",
            position,
            conversation.messages,
            frozenset({taucustomer.AGENT_SPEAKER}),
            conversation.calls,
        )
        for position, (task, conversation) in enumerate(sorted(said.items()))
    ]
    cases = [
        Case(
            PARA_AGENT,
            line["question"],
            frozenset(f"tau-{line['task_id']}-m{i}" for i in line["answer"]),
        )
        for line in taucustomer.questions(path)
    ]
    notes = [f"{len(events)} conversations, {len(cases)} questions"]
    return Corpus(
        # Its misses were read on 2026-12-06 to design against: in-sample since.
        "customer memory, tau-bench (blind, in-sample)",
        CUSTOMER_TAU_TENANT,
        events,
        cases,
        notes,
    )


def long_corpus(split: str = "all") -> Corpus:
    """The blind long-conversation set: each conversation its own channel of two people, one
    agent remembering them all; conversations alternate between the dev and test halves in
    file order."""
    events: list[RawEvent] = []
    cases: list[Case] = []
    lines = longconv.read_lines()
    for position, line in enumerate(lines):
        events.extend(longconv.conversation_events(LONG_TENANT, line))
        if split != "all" and ("dev", "test")[position % 2] != split:
            continue
        cases.extend(
            Case(longconv.LONG_AGENT, q.question, q.gold, q.kind) for q in longconv.questions(line)
        )
    name = "long conversations (blind)" + ("" if split == "all" else f", {split} half")
    return Corpus(name, LONG_TENANT, events, cases, [f"{len(lines)} conversations"])


def sync_jobs(corpus: Corpus) -> list[SyncJob]:
    """The real stages 1-4 over the corpus (trust open: scene speakers have no grants)."""
    events = [validate_event(raw) for raw in corpus.events]
    return ingest_turns(events, {}, DirectoryTrustPolicy("open", {})).jobs
