"""The model trust boundary: pure functions over what crosses between the model, the tools and Slack
(redaction, tool-call scope checks, framing untrusted text as data, escaping posts).

Imports only `schemas` and third-party libraries (pyproject.toml, [tool.importlinter]), so every
service can apply the same rules without importing another service.
"""
