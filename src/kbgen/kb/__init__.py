"""The knowledge base on disk: the record and plan models, the YAML store, loading and
validating a folder of them, safe file writes, new-record scaffolds, and git (it at a revision).

The bottom stage: every other stage reads and writes records through it; it imports none of them.
"""
