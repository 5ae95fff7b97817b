"""`incident-memory rederive`: re-derive the context through a new compactor, blue/green, with a diff.

Above the services, beside the CLI: it runs the compactor and the projector as subprocesses with the
command lines production uses, and reads what they wrote. `names` (one name -> every resource),
`progress` (lag to a target), `run` (the processes), `snapshot` + `diff` (what changed), `switch`
(the readers' views), `main` (the command line).
"""
