"""memsync's public API: what a platform imports, and nothing of the worker side."""
