"""The memory inspector: read-only web pages served by `memsync serve` under /inspect.

What each agent knows (facts with provenance and supersession, commitments, summaries), channel
timelines with speaker labels, queue depths and lag, and the dead letters with a Replay button
(the only change it can make). Behind the API's token; server-rendered, no script, every value
escaped. It lives in workers/ because dead letters and replay do; `memsync serve` adds its
router to the app memsync.http builds.

Import what you need from its modules (routes: `inspector_router`; auth: `Sessions`): the
package itself imports nothing, so its modules can import each other through it.
"""
