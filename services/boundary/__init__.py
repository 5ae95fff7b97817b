"""The model trust boundary: pure functions over what leaves for a model or for Slack.

Imports only `schemas` and third-party libraries (pyproject.toml, [tool.importlinter]), so every
service can apply the same rules without importing another service.
"""
