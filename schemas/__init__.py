"""The wire contract and domain records: pydantic models only, no I/O."""

from schemas.event import SCHEMA_VERSION, Channel, Message, Participant, ToolCall, TurnEvent

__all__ = ["SCHEMA_VERSION", "Channel", "Message", "Participant", "ToolCall", "TurnEvent"]
