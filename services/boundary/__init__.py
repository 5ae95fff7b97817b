"""The model trust boundary: pure checks on what crosses between the model, the tools and Slack.

Imports only `schemas` and third-party libraries, so every service can apply the same rules.
"""
