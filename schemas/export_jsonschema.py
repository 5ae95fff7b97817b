"""Export the JSON Schema of every event model into schemas/jsonschema/*.json (committed).

The pydantic models are the contract; the exported files let non-Python consumers (and
reviewers) see it. `python -m schemas.export_jsonschema --check` fails when the files are stale,
and tests/test_schemas.py runs that check.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from schemas.events import EVENT_TYPES, DeadLetter, ThreadEvent

OUT_DIR = Path(__file__).resolve().parent / "jsonschema"


DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic 2 generates


def _render(schema: dict[str, Any]) -> str:
    schema = {"$schema": DIALECT, **schema}
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_all() -> dict[str, str]:
    """File name -> content: one file per model, plus ThreadEvent (the discriminated union on `type`)."""
    models: list[type[BaseModel]] = [*EVENT_TYPES, DeadLetter]
    files = {
        f"{m.__name__}.json": _render({"$id": f"{m.__name__}.json", **m.model_json_schema()}) for m in models
    }
    union = TypeAdapter(ThreadEvent).json_schema()
    files["ThreadEvent.json"] = _render({"$id": "ThreadEvent.json", "title": "ThreadEvent", **union})
    return files


def stale(out_dir: Path = OUT_DIR) -> list[str]:
    """Names of files that are missing, different, or no longer produced."""
    wanted = render_all()
    problems = [
        n for n, text in wanted.items() if not (out_dir / n).is_file() or (out_dir / n).read_text() != text
    ]
    extra = [p.name for p in out_dir.glob("*.json") if p.name not in wanted] if out_dir.is_dir() else []
    return sorted(problems + extra)


def write(out_dir: Path = OUT_DIR) -> list[str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = render_all()
    for path in out_dir.glob("*.json"):
        if path.name not in wanted:
            path.unlink()
    for name, text in wanted.items():
        (out_dir / name).write_text(text)
    return sorted(wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed files are stale")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        if names:
            print(
                f"stale JSON Schema files (run python -m schemas.export_jsonschema): {', '.join(names)}",
                file=sys.stderr,
            )
            return 1
        return 0
    print(f"wrote {len(write())} files to {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
