"""The trust directory: owners and grants between participants."""

from __future__ import annotations

from typing import Final

from pipeline.graph.model import (
    OWNED_BY,
    PARTICIPANT,
    TRUSTS,
)

# -- trust directory ------------------------------------------------------------------------------

GRANT_TRUST: Final = f"""
MERGE (t:{PARTICIPANT} {{key: $truster_key}})
ON CREATE SET t.tenant = $tenant, t.id = $truster_id
MERGE (p:{PARTICIPANT} {{key: $trustee_key}})
ON CREATE SET p.tenant = $tenant, p.id = $trustee_id
MERGE (t)-[r:{TRUSTS}]->(p)
SET r.as = $kind, r.granted_at = datetime()
"""

REVOKE_TRUST: Final = f"""
MATCH (:{PARTICIPANT} {{key: $truster_key}})-[r:{TRUSTS}]->(:{PARTICIPANT} {{key: $trustee_key}})
DELETE r
RETURN count(r) AS revoked
"""

LIST_TRUST: Final = f"""
MATCH (t:{PARTICIPANT} {{tenant: $tenant}})-[r:{TRUSTS}]->(p:{PARTICIPANT})
WHERE $truster_key IS NULL OR t.key = $truster_key
RETURN t.id AS truster, p.id AS trustee, r.as AS as, toString(r.granted_at) AS granted_at
ORDER BY truster, trustee
"""

AGENT_OWNERS: Final = f"""
MATCH (:{PARTICIPANT} {{key: $agent_key}})-[:{OWNED_BY}]->(o:{PARTICIPANT})
RETURN o.id AS owner
ORDER BY owner
"""

LOOKUP_TRUST: Final = f"""
UNWIND $keys AS key
MATCH (t:{PARTICIPANT} {{key: key}})
OPTIONAL MATCH (t)-[:{TRUSTS}]->(p:{PARTICIPANT})
OPTIONAL MATCH (t)-[:{OWNED_BY}]->(o:{PARTICIPANT})
RETURN t.key AS key, collect(DISTINCT p.key) AS trusted, min(o.key) AS owner
"""
