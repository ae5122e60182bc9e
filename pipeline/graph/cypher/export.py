"""Export's statements: a participant, the channels they were in, the messages they said, and the
memory about them, stated by them, or owed by or to them, each in a fixed order."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.forget import COMMITMENTS_OF_PERSON
from pipeline.graph.model import (
    ABOUT,
    AGENT,
    CHANNEL,
    EPISODE,
    EVIDENCE,
    FACT,
    IN,
    MEMBER_OF,
    OBSERVED,
    PARTICIPANT,
    SAID,
)

EXPORT_PARTICIPANT: Final = f"""
MATCH (p:{PARTICIPANT} {{key: $key}})
RETURN {{id: p.id, kind: p.kind, display_name: p.display_name, handle: p.handle,
        label: p.label, anonymous: coalesce(p.anonymous, false), agent: p:{AGENT}}} AS participant
"""

# The channels they were listed in, spoken or not (the audience rule's record of them).
EXPORT_CHANNELS: Final = f"""
MATCH (:{PARTICIPANT} {{key: $key}})-[:{MEMBER_OF}]->(c:{CHANNEL})
RETURN {{id: c.id, kind: c.kind, title: c.title}} AS channel
ORDER BY c.id
"""

EXPORT_EPISODES: Final = f"""
MATCH (:{PARTICIPANT} {{key: $key}})-[:{SAID}]->(e:{EPISODE})
OPTIONAL MATCH (e)-[:{IN}]->(c:{CHANNEL})
RETURN {{id: e.id, channel_id: c.id, created_at: e.created_at, role: e.role, text: e.content,
        observed_by: COLLECT {{
          MATCH (a:{AGENT})-[:{OBSERVED}]->(e) RETURN a.id AS id ORDER BY id
        }}}} AS episode
ORDER BY e.created_at, e.key
"""


def _provenance(node: str) -> str:
    return f"""evidence: COLLECT {{
          MATCH ({node})-[:{EVIDENCE}]->(ev:{EPISODE}) RETURN ev.id ORDER BY ev.created_at, ev.key
        }},
        learnt_in: COLLECT {{
          MATCH ({node})-[:{EVIDENCE}]->(:{EPISODE})-[:{IN}]->(src:{CHANNEL})
          RETURN DISTINCT src.id AS id ORDER BY id
        }}"""


# Facts about the participant (by index per agent, or ABOUT) and facts they stated (their
# messages are the evidence).
EXPORT_FACTS: Final = f"""
CALL () {{
  MATCH (f:{FACT})
  WHERE f.agent_key IN $agents AND f.subject_key = $key AND f.slot IS NOT NULL
  RETURN f
  UNION
  MATCH (:{PARTICIPANT} {{key: $key}})<-[:{ABOUT}]-(f:{FACT})
  RETURN f
  UNION
  MATCH (:{PARTICIPANT} {{key: $key}})-[:{SAID}]->(:{EPISODE})<-[:{EVIDENCE}]-(f:{FACT})
  RETURN f
}}
WITH DISTINCT f
OPTIONAL MATCH (a:{PARTICIPANT} {{key: f.agent_key}})
OPTIONAL MATCH (by:{PARTICIPANT} {{key: f.stated_by}})
OPTIONAL MATCH (subject:{PARTICIPANT} {{key: f.subject_key}})
RETURN {{key: f.key, agent_id: a.id, about_id: subject.id,
        about_you: coalesce(f.subject_key = $key, false),
        kind: f.kind, predicate: f.predicate, value: f.value, topic: f.topic, text: f.text,
        negated: f.negated, hedged: f.hedged, source: f.source, stated_by_id: by.id,
        stated_at: f.stated_at, last_confirmed: f.last_confirmed, confidence: f.confidence,
        expires_at: f.expires_at, superseded_at: f.superseded_at, verified_at: f.verified_at,
        {_provenance("f")}}} AS fact
ORDER BY a.id, f.key
"""

EXPORT_COMMITMENTS: Final = f"""
{COMMITMENTS_OF_PERSON}
WITH DISTINCT c
OPTIONAL MATCH (a:{PARTICIPANT} {{key: c.agent_key}})
OPTIONAL MATCH (by:{PARTICIPANT} {{key: c.owed_by_key}})
OPTIONAL MATCH (to:{PARTICIPANT} {{key: c.owed_to_key}})
RETURN {{key: c.key, agent_id: a.id, owed_by_id: by.id, owed_to_id: to.id,
        owed_by_you: coalesce(c.owed_by_key = $key, false),
        owed_to_you: coalesce(c.owed_to_key = $key, false), text: c.text,
        value: c.value, status: c.status, due: c.due, opened_at: c.opened_at,
        closed_at: c.closed_at, source: c.source, {_provenance("c")}}} AS commitment
ORDER BY a.id, c.opened_at, c.key
"""
