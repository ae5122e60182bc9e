"""Neo4j side: schema, the idempotent writer and the read side. All Cypher lives in cypher/."""
