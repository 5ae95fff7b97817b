"""The agent's voice: the Slack poster (`incident-memory slack`).

It turns each post of a committed round, and each alert that opens an incident, into exactly one
Slack message in the right thread, recording intent and outcome as events (see `poster.py`).
"""
