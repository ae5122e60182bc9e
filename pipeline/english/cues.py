"""English cue words the extractive summarizer classifies lines by: commitments, decisions,
and the days, months and units that make a line carry a number or date."""

from __future__ import annotations

import re

# Day and month names as regular-expression alternatives (also read by answers.py).
DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
MONTHS = (
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
COMMITMENT = re.compile(
    r"\b(i'll|i will|i'm going to|i am going to|i promise|let me (?!know)|we'll|we will|i'm on it|"
    r"will (send|share|call|email|book|follow up|get back|check|handle|update|pay|bring|"
    r"confirm|fix|review|prepare|finish|deliver|schedule|arrange|ping)|"
    rf"by (the )?({DAYS}|tomorrow|tonight|eod|cob|noon|end of (the )?(day|week|month)|"
    r"next week|\d))",
    re.IGNORECASE,
)
DECISION = re.compile(
    r"\b(we'll go with|we will go with|let's go with|let's do|going with|go ahead with|"
    r"decided|decision|agreed|agree to|settled on|we're doing|final (choice|answer|plan)|"
    r"confirmed|approved|it's a deal|deal)\b",
    re.IGNORECASE,
)
# Digits with a unit are quantities or times ("3pm", "2nd", "5k"), not identifiers.
QUANTITY = re.compile(
    r"\d+(st|nd|rd|th|am|pm|s|k|m|h|hr|hrs|min|mins|kg|km|mb|gb|x|ish)", re.IGNORECASE
)
NUMBER = re.compile(
    rf"\d|[$€£¥]|\b({DAYS}|{MONTHS}|today|tomorrow|tonight|yesterday|noon|midnight)\b",
    re.IGNORECASE,
)
