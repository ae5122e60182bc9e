"""The ordered stages, as plain functions over schemas, plus graph/ for Neo4j."""
