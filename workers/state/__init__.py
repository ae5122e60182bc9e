"""Redis state kept beside the queues: turn ledger, in-flight turns, dead letters, activity.

Key layouts live in memsync/keys.py, shared with the platform side.
"""
