"""The English extraction grammar: chat patterns and the rules that read candidates out of
text, topic words, due-date phrases and the summarizer's cue words. Everything that knows
English lives here; the stages that use it (pipeline/extract.py, pipeline/summarize.py) do not.
"""
