"""Segments' statements: a pair's last segment, appending episodes to segments, and repairing
segments whose episodes were erased or are no longer observed (pipeline/graph/segments.py)."""

from __future__ import annotations

from typing import Final

from pipeline.graph.cypher.instant import micros
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

# The agent's latest $lookback messages of the channel at or before the segments' position
# ($until_time, $until_key), newest first: where a late message is looked for. One descending
# walk of the (channel_key, created_at) index, bounded whatever the channel's size.
RECENT_EPISODE_KEYS: Final = f"""
MATCH (e:{EPISODE})
WHERE e.channel_key = $channel_key AND e.created_at <= $until_time AND {UP_TO_POSITION}
  AND {observed_by_agent("e")}
RETURN e.key AS key, {micros("e.created_at")} AS created_at
ORDER BY e.created_at DESC, e.key DESC
LIMIT $lookback
"""

# The message keys of the pair's segments that end at or after $since, among its last $lookback
# by number (each lists at least one message, so older ones cannot hold the window's): a seek
# of segment_agent_channel_seq, read backwards. Every key a segment lists was said at or before
# the segment's last_at (a late message joins with the position's time).
RECENT_SEGMENT_KEYS: Final = f"""
MATCH (s:{SEGMENT})
WHERE s.agent_key = $agent_key AND s.channel_key = $channel_key AND s.seq IS NOT NULL
WITH s ORDER BY s.seq DESC LIMIT $lookback
WITH s WHERE s.last_at >= $since
UNWIND coalesce(s.episode_keys, []) AS key
RETURN key
"""

# Which of $keys any segment of the pair lists: read only when the recent segments lack some of
# the window's messages, before they are appended as late.
LISTED_KEYS: Final = f"""
MATCH (s:{SEGMENT})
WHERE s.agent_key = $agent_key AND s.channel_key = $channel_key AND s.seq IS NOT NULL
UNWIND coalesce(s.episode_keys, []) AS key
WITH key WHERE key IN $keys
RETURN DISTINCT key
"""

# The episodes of $keys as a summarizer reads them, in (created_at, key) order: unique-key seeks.
EPISODES_BY_KEY: Final = f"""
UNWIND $keys AS key
MATCH (e:{EPISODE} {{key: key}})
RETURN e.key AS key, e.speaker_label AS speaker_label, e.content AS content,
       {micros("e.created_at")} AS created_at
ORDER BY e.created_at, e.key
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
