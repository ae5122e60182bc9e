"""Local development services: a private Redis and Neo4j, and a local worker stack."""
