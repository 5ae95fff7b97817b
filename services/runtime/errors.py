"""Errors a user can act on: the CLI prints them as one line and exits non-zero, no traceback."""


class UserFacingError(Exception):
    """A problem with configuration or input, whose message names what is wrong."""

    exit_code = 1


class BadInput(UserFacingError):
    exit_code = 2


class KafkaRefused(UserFacingError):
    """The broker answered, and refused us: credentials, TLS trust, or ACLs. Retrying will not help."""
