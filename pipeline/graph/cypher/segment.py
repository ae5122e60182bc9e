"""Segments' statements: a pair's last segment, appending episodes to segments, and repairing
segments whose episodes were erased or are no longer observed (pipeline/graph/segments.py)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.search import observed_by_agent
from pipeline.graph.cypher.summary import UP_TO_POSITION
from pipeline.graph.model import AGENT_NODE, EPISODE, OBSERVED, SEGMENT

# One seek on segment_agent_channel_seq: the pair's highest segment number.
LAST_SEGMENT: Final = f"""
MATCH (s:{SEGMENT})
WHERE s.agent_key = $agent_key AND s.channel_key = $channel_key AND s.seq IS NOT NULL
RETURN s.seq AS seq, s.count AS count, s.last_at AS last_at, s.last_key AS last_key
ORDER BY s.seq DESC
LIMIT 1
"""

# How many messages the pair's segments list, against how many of the agent's messages of the
# channel lie at or before the segments' position ($until_time, $until_key): more of the latter
# means some arrived late, with an earlier time than messages already segmented.
SEGMENT_COVERAGE: Final = f"""
CALL () {{
  MATCH (s:{SEGMENT})
  WHERE s.agent_key = $agent_key AND s.channel_key = $channel_key AND s.seq IS NOT NULL
  RETURN coalesce(sum(s.count), 0) AS listed
}}
CALL () {{
  MATCH (e:{EPISODE})
  WHERE e.channel_key = $channel_key AND e.created_at <= $until_time AND {UP_TO_POSITION}
    AND {observed_by_agent("e")}
  RETURN count(e) AS observed
}}
RETURN listed, observed
"""

# Every message key the pair's segments list; with $since, only those of segments whose last
# message is at or after it. A segment's `last_at` is never earlier than any message it lists
# (a late message joins the open segment, whose last_at is the position), so no message said at
# or after $since is left out. A segment written before last_at existed is always read.
SEGMENT_KEYS: Final = f"""
MATCH (s:{SEGMENT})
WHERE s.agent_key = $agent_key AND s.channel_key = $channel_key AND s.seq IS NOT NULL
  AND ($since IS NULL OR coalesce(s.last_at >= $since, true))
UNWIND coalesce(s.episode_keys, []) AS key
RETURN key
"""

# `episode_keys` lists the segment's messages in order (no edges: recall and repair read the
# list, a unique-key seek each, where edges would cost 16 relationship writes a segment). The
# text is built here from the episodes as stored, not from what the pass read: an episode
# erased in between is simply not found, so a segment never holds text nobody may see. A row
# whose segment changed since it was read (`count` differs: another pass won) writes nothing.
APPEND_SEGMENTS: Final = f"""
UNWIND $rows AS row
MERGE (s:{SEGMENT} {{key: row.key}})
ON CREATE SET s.tenant = $tenant, s.agent_key = $agent_key, s.channel_key = $channel_key,
              s.seq = row.seq, s.count = 0, s.text = '', s.scope = $scope
WITH s, row
WHERE s.count = row.expected_count
CALL (s, row) {{
  UNWIND range(0, size(row.episode_keys) - 1) AS i
  MATCH (e:{EPISODE} {{key: row.episode_keys[i]}})
  WHERE EXISTS {{ (:{AGENT_NODE} {{key: $agent_key}})-[:{OBSERVED}]->(e) }}
  WITH e, i ORDER BY i
  RETURN collect(e.speaker_label + ': ' + e.content) AS lines, collect(e.key) AS keys
}}
SET s.text = CASE WHEN s.text = '' THEN '' ELSE s.text + '\\n' END
             + reduce(t = '', l IN lines | CASE WHEN t = '' THEN l ELSE t + '\\n' + l END),
    s.episode_keys = coalesce(s.episode_keys, []) + keys,
    s.count = s.count + size(lines), s.last_at = row.last_at, s.last_key = row.last_key
RETURN count(s) AS written
"""

# Segments of a tenant whose text no longer matches what their agent may see (an episode was
# erased, or the agent forgotten): rebuilt from what is left, or deleted when nothing is.
REPAIR_SEGMENTS: Final = f"""
MATCH (s:{SEGMENT})
WHERE ($tenant IS NULL OR s.tenant = $tenant) AND s.key > $after
WITH s ORDER BY s.key LIMIT $page
CALL (s) {{
  WITH coalesce(s.episode_keys, []) AS listed
  UNWIND range(0, size(listed) - 1) AS i
  OPTIONAL MATCH (e:{EPISODE} {{key: listed[i]}})
  WITH i, e, e IS NOT NULL
             AND EXISTS {{ (:{AGENT_NODE} {{key: s.agent_key}})-[:{OBSERVED}]->(e) }} AS seen
  WITH e, seen ORDER BY i
  RETURN [x IN collect(CASE WHEN seen THEN e.speaker_label + ': ' + e.content END)
          WHERE x IS NOT NULL] AS lines,
         [x IN collect(CASE WHEN seen THEN e.key END) WHERE x IS NOT NULL] AS keys
}}
WITH s, lines, keys, s.key AS key, size(lines) <> s.count AS stale
CALL (s, lines, keys, stale) {{
  WITH s, lines, keys WHERE stale AND size(lines) > 0
  SET s.text = reduce(t = '', l IN lines | CASE WHEN t = '' THEN l ELSE t + '\\n' + l END),
      s.episode_keys = keys, s.count = size(lines)
}}
CALL (s, lines, stale) {{
  WITH s WHERE stale AND size(lines) = 0
  DETACH DELETE s
}}
RETURN max(key) AS last, count(*) AS seen, sum(CASE WHEN stale THEN 1 ELSE 0 END) AS repaired
"""
