"""Process plumbing every service needs: connection settings, JSON logs, metrics, clean errors.

Only plumbing lives here; the services share no domain code but `schemas/`.
"""
