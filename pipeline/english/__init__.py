"""The English grammar: chat patterns and the rules that read candidates out of text, topic
words, due-date phrases, the summarizer's cue words and the kinds of value a question asks for.
Everything that knows English lives here; what uses it (pipeline/extract.py,
pipeline/summarize.py, recall's ranking in pipeline/graph/search.py) does not.
"""
