"""`python -m memsync.http`: write the OpenAPI document and the event schema (docs/)."""

from memsync.http.server import main

raise SystemExit(main())
