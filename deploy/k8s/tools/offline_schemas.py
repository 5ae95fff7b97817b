"""Lay out JSON schemas for kubeconform from registry packages, so validation runs offline.

kubeconform fetches its schemas from GitHub at run time; nothing but package registries is
reachable here and in CI. Two sources replace that, both derived at run time (nothing vendored):

* `k8s WHEEL VERSION OUT`: the Kubernetes schemas shipped in the PyPI wheel
  `kubernetes-validate` (generated from each release's OpenAPI). Its `vX.Y.0-local-strict`
  files reference `/api/_definitions.json`, an absolute URI that would resolve to the web; we
  rewrite that reference to the `_definitions.json` beside each file and drop the web `$id`s.
  The schema content is otherwise untouched.
* `crd CRD_YAML OUT`: a CustomResourceDefinition's `openAPIV3Schema` (e.g. KEDA's, read from the
  KEDA Go module) converted to a strict JSON schema named as kubeconform looks it up
  (`scaledobject-keda-v1alpha1.json`). What does not translate is stated in `convert_openapi`.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

_WEB_DEFINITIONS = '"/api/_definitions.json#'
_WHEEL_ROOT = "kubernetes_validate/kubernetes-json-schema"


def extract_k8s(wheel: Path, version: str, out: Path) -> int:
    """Write the strict schemas of Kubernetes `version` (e.g. 1.33.0) from the wheel into `out`."""
    prefix = f"{_WHEEL_ROOT}/v{version}-local-strict/"
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if not (name.startswith(prefix) and name.endswith(".json")):
                continue
            text = zf.read(name).decode().replace(_WEB_DEFINITIONS, '"_definitions.json#')
            doc = json.loads(text)
            doc.pop("$id", None)
            (out / name[len(prefix) :]).write_text(json.dumps(doc))
            count += 1
    if count == 0:
        raise SystemExit(f"{wheel}: no schemas for Kubernetes v{version} (looked under {prefix})")
    return count


def convert_openapi(node: Any) -> Any:
    """OpenAPI v3 (structural CRD schema) -> JSON Schema, strict like kubeconform's own converter.

    * objects with `properties` and no `additionalProperties` reject unknown fields, unless
      marked `x-kubernetes-preserve-unknown-fields`;
    * `nullable: true` adds "null" to the type; `x-kubernetes-int-or-string` accepts both;
    * `x-kubernetes-validations` (CEL rules) cannot be evaluated here and are dropped; the
      tests check the one rule that matters for the compactor (min <= max replicas).
    """
    if isinstance(node, list):
        return [convert_openapi(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("x-kubernetes-validations", "nullable"):
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: convert_openapi(sub) for name, sub in value.items()}
        else:
            out[key] = convert_openapi(value)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def convert_crd(crd_file: Path, out: Path) -> list[Path]:
    """Write one schema per served version of the CRD in `crd_file`; returns the paths."""
    crd = yaml.safe_load(crd_file.read_text())
    if crd.get("kind") != "CustomResourceDefinition":
        raise SystemExit(f"{crd_file}: not a CustomResourceDefinition")
    spec = crd["spec"]
    kind: str = spec["names"]["kind"]
    group: str = spec["group"]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        schema = convert_openapi(version["schema"]["openAPIV3Schema"])
        api_version = f"{group}/{version['name']}"
        props = schema.setdefault("properties", {})
        props["apiVersion"] = {"type": "string", "enum": [api_version]}
        props["kind"] = {"type": "string", "enum": [kind]}
        schema["$schema"] = "http://json-schema.org/draft-04/schema#"
        schema["description"] = f"{kind} {api_version}, converted from {crd_file.name}"
        # kubeconform's file name: kind, first label of the group, version (all lower case).
        path = out / f"{kind.lower()}-{group.split('.')[0].lower()}-{version['name'].lower()}.json"
        path.write_text(json.dumps(schema, indent=1, sort_keys=True))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    k8s = sub.add_parser("k8s", help="Kubernetes schemas from the kubernetes-validate wheel")
    k8s.add_argument("wheel", type=Path)
    k8s.add_argument("version", help="e.g. 1.33.0")
    k8s.add_argument("out", type=Path)
    crd = sub.add_parser("crd", help="a CRD's openAPIV3Schema as a kubeconform schema")
    crd.add_argument("crd_files", type=Path, nargs="+")
    crd.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cmd == "k8s":
        n = extract_k8s(args.wheel, args.version, args.out)
        print(f"  k8s v{args.version}: {n} schemas -> {args.out}")
    else:
        for crd_file in args.crd_files:
            for path in convert_crd(crd_file, args.out):
                print(f"  CRD {crd_file.name} -> {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
