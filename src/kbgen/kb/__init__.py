"""The knowledge base on disk: records and plans read, validated, written safely, seen at revisions.

The bottom stage: every other stage reads and writes records through it; it imports none of them.
"""
