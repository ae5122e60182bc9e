"""Checks of the deployment in deploy/, each a function returning the problems it finds: a small
kustomize loader, Kubernetes schema validation and invariants (tests/unit/test_manifests.py).

The Kubernetes base (deploy/k8s) and its KEDA addition (deploy/k8s/keda) are rendered by a
small kustomize loader (namespace, resources, images) and each core object is validated against
the official JSON schemas bundled by kubernetes-validate.
KEDA's objects get structural checks instead: no registry ships KEDA's CRD schemas as JSON
(the npm package @kubernetes-models/keda carries only compiled validators). Every invariant is
a function returning a list of problems, run on the real files here and, mutated in memory, on
broken copies, so each check is shown to fail when it should.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from memsync.settings import (
    EMBED_QUEUE,
    FOLD_QUEUE,
    INGEST_QUEUE,
    SYNC_QUEUE,
    Settings,
    unknown_variables,
)
from workers.worker.config import celery_config, delivery_problems

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
KEDA = K8S / "keda"
# The oldest Kubernetes the manifests claim to work on, and the newest the schemas cover.
KUBERNETES_VERSIONS = ("1.30", "1.37")
QUEUES = {"ingest": INGEST_QUEUE, "sync": SYNC_QUEUE, "embed": EMBED_QUEUE, "fold": FOLD_QUEUE}
SECRET_NAME = "memsync-credentials"
METRICS_PORT = 9100
API_PORT = 8077
# The default of MEMSYNC_TASK_TIME_LIMIT, when neither the ConfigMap nor a pod sets it.
DEFAULT_TASK_TIME_LIMIT = Settings.model_fields["task_time_limit"].default

Obj = dict[str, Any]


# -- the loader ------------------------------------------------------------------------------------


class RenderError(Exception):
    """A kustomization this loader cannot render as kustomize would."""


KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "namespace", "resources", "images"}
# Kinds kustomize leaves without a namespace (the ones a memsync deployment could contain).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume"}


def load_documents(path: Path) -> list[Obj]:
    """Every non-empty YAML document of a file."""
    with path.open(encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


def render(directory: Path) -> list[Obj]:
    """The objects `kustomize build directory` would print (in file order, not kind order)."""
    (kustomization,) = load_documents(directory / "kustomization.yaml")
    unknown = sorted(set(kustomization) - KUSTOMIZATION_FIELDS)
    if unknown:
        raise RenderError(
            f"{directory}: kustomization fields this loader does not apply: {unknown}"
        )
    objects: list[Obj] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        objects.extend(render(path) if path.is_dir() else load_documents(path))
    namespace = kustomization.get("namespace")
    if namespace:
        for obj in objects:
            if obj["kind"] == "Namespace":
                obj["metadata"]["name"] = namespace
            elif obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = namespace
    for override in kustomization.get("images", []):
        for container in containers_of(objects):
            container["image"] = override_image(container["image"], override)
    return objects


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of an image reference; a registry port is not taken for a tag."""
    rest, _, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :], digest or None
    return rest, None, digest or None


def override_image(image: str, override: Obj) -> str:
    """One `images:` entry applied to one reference, as kustomize does: a new digest or tag
    replaces both the old tag and the old digest."""
    name, tag, digest = split_image(image)
    if name != override["name"]:
        return image
    name = str(override.get("newName", name))
    if "digest" in override:
        return f"{name}@{override['digest']}"
    if "newTag" in override:
        return f"{name}:{override['newTag']}"
    return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def pod_specs(objects: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(owner, pod spec) for every workload."""
    for obj in objects:
        spec = obj.get("spec") or {}
        template = spec.get("template") or (spec.get("jobTemplate") or {}).get("spec", {}).get(
            "template"
        )
        if obj["kind"] == "Pod":
            yield obj, spec
        elif isinstance(template, dict) and "spec" in template:
            yield obj, template["spec"]


def containers_of(objects: list[Obj]) -> Iterator[Obj]:
    """Every container and init container of every workload."""
    for _, pod in pod_specs(objects):
        yield from pod.get("initContainers", [])
        yield from pod.get("containers", [])


def kind(objects: list[Obj], kind_name: str) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] == kind_name]


def named(objects: list[Obj], kind_name: str, name: str) -> Obj | None:
    return next((obj for obj in kind(objects, kind_name) if obj["metadata"]["name"] == name), None)


def ident(obj: Obj) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


# -- what the pods are told ------------------------------------------------------------------------


def config_data(objects: list[Obj], name: str = "memsync") -> dict[str, str]:
    """A ConfigMap's data as the strings a pod's environment gets (empty if it is missing)."""
    config = named(objects, "ConfigMap", name)
    return {} if config is None else {k: str(v) for k, v in (config.get("data") or {}).items()}


def effective_env(objects: list[Obj], container: Obj) -> dict[str, str]:
    """A container's plain environment: its ConfigMaps, then its literal `env` values."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(config_data(objects, source["configMapRef"]["name"]))
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
    return env


def secret_env(container: Obj) -> dict[str, tuple[str, str]]:
    """Variable -> (Secret, key) for every variable a container reads from a Secret."""
    found = {}
    for entry in container.get("env", []):
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            found[entry["name"]] = (ref["name"], ref["key"])
    return found


def worker_queues(container: Obj) -> list[str] | None:
    """The full queue names a `memsync worker` container consumes (None: not a worker)."""
    command = [*container.get("command", []), *container.get("args", [])]
    if command[:2] != ["memsync", "worker"]:
        return None
    queues = "ingest,sync,fold"
    for flag in ("--queues", "-Q"):
        if flag in command:
            queues = command[command.index(flag) + 1]
    return [QUEUES.get(queue, queue) for queue in queues.split(",")]


def worker_deployments(objects: list[Obj]) -> list[tuple[Obj, Obj]]:
    """(Deployment, its worker container) for every worker Deployment."""
    found = []
    for deployment in kind(objects, "Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if worker_queues(container) is not None:
                found.append((deployment, container))
    return found


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a matchLabels selector picks these labels (an empty one picks nothing here)."""
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


# -- the checks: each returns what is wrong, empty when nothing is ---------------------------------


def schema_problems(objects: list[Obj], version: str) -> list[str]:
    """Core objects that the official schemas of that Kubernetes version reject (strict)."""
    problems = []
    for obj in objects:
        if obj["apiVersion"].startswith("keda.sh/"):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(part) for part in error.path)
            problems.append(f"{ident(obj)}: {path}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            problems.append(f"{ident(obj)}: {error.message}")
    return problems


def pinned_version(project_version: str) -> Callable[[str], str | None]:
    """A checker of one image reference: why it is not pinned, or None."""
    expected = {
        "memsync": re.escape(project_version),
        "redis": r"7\.2\.\d+",
        "neo4j": r"5\.26\.\d+-community",
    }

    def problem(image: str) -> str | None:
        name, tag, digest = split_image(image)
        base = name.rsplit("/", 1)[-1]
        if digest is not None:
            return None if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else "malformed digest"
        if tag is None or tag == "latest":
            return "no version pinned (tag latest or none)"
        pattern = expected.get(base)
        if pattern is not None and not re.fullmatch(pattern, tag):
            return f"tag {tag} is not {pattern}"
        return None

    return problem


def image_problems(objects: list[Obj], project_version: str) -> list[str]:
    """Images without a pinned version: memsync's must be the project's, Redis 7.2.x, Neo4j
    5.26.x Community (a tag `latest`, or none, follows whatever is pushed next)."""
    check = pinned_version(project_version)
    return [
        f"{ident(owner)}: image {container['image']}: {reason}"
        for owner, pod in pod_specs(objects)
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]
        if (reason := check(container["image"])) is not None
    ]


def grace_problems(objects: list[Obj]) -> list[str]:
    """Worker pods that SIGKILL a task Celery would still let run: the grace period must
    exceed the task time limit the pod is given."""
    problems = []
    for deployment, container in worker_deployments(objects):
        pod = deployment["spec"]["template"]["spec"]
        limit = int(
            effective_env(objects, container).get(
                "MEMSYNC_TASK_TIME_LIMIT", DEFAULT_TASK_TIME_LIMIT
            )
        )
        grace = int(pod.get("terminationGracePeriodSeconds", 30))
        if grace <= limit:
            problems.append(
                f"{ident(deployment)}: terminationGracePeriodSeconds {grace} is not above "
                f"MEMSYNC_TASK_TIME_LIMIT {limit}"
            )
    return problems


def workload_problems(objects: list[Obj]) -> list[str]:
    """Deployments and StatefulSets whose containers lack resources or probes, or that may
    run as root or gain privileges."""
    problems = []
    for obj in [*kind(objects, "Deployment"), *kind(objects, "StatefulSet")]:
        pod = obj["spec"]["template"]["spec"]
        if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
            problems.append(f"{ident(obj)}: pod securityContext lacks runAsNonRoot")
        if pod.get("restartPolicy", "Always") != "Always":
            problems.append(f"{ident(obj)}: restartPolicy must be Always")
        for container in pod["containers"]:
            where = f"{ident(obj)}/{container['name']}"
            resources = container.get("resources") or {}
            requests = resources.get("requests") or {}
            for need in ("cpu", "memory"):
                if need not in requests:
                    problems.append(f"{where}: no {need} request")
            if "memory" not in (resources.get("limits") or {}):
                problems.append(f"{where}: no memory limit")
            for probe in ("readinessProbe", "livenessProbe"):
                if probe not in container:
                    problems.append(f"{where}: no {probe}")
            security = container.get("securityContext") or {}
            if security.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: allowPrivilegeEscalation is not false")
            if obj["kind"] == "Deployment" and not security.get("readOnlyRootFilesystem"):
                problems.append(f"{where}: root filesystem is writable")
    return problems


def worker_problems(objects: list[Obj]) -> list[str]:
    """Worker pods whose probes or scraping cannot reach the metrics server, and queues no
    Deployment consumes."""
    problems = []
    consumed: set[str] = set()
    for deployment, container in worker_deployments(objects):
        where = ident(deployment)
        queues = worker_queues(container) or []
        consumed.update(queues)
        unknown = sorted(set(queues) - set(QUEUES.values()))
        if unknown:
            problems.append(f"{where}: unknown queues {unknown}")
        env = effective_env(objects, container)
        if env.get("MEMSYNC_METRICS_HOST") != "0.0.0.0":
            problems.append(f"{where}: MEMSYNC_METRICS_HOST is not 0.0.0.0 (kubelet cannot probe)")
        if env.get("MEMSYNC_METRICS_PORT") != str(METRICS_PORT):
            problems.append(f"{where}: MEMSYNC_METRICS_PORT is not {METRICS_PORT}")
        ports = {port.get("name"): port["containerPort"] for port in container.get("ports", [])}
        if ports.get("metrics") != METRICS_PORT:
            problems.append(f"{where}: no container port metrics={METRICS_PORT}")
        for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
            http = (container.get(probe) or {}).get("httpGet") or {}
            if (http.get("path"), http.get("port")) != (path, "metrics"):
                problems.append(f"{where}: {probe} is not httpGet {path} on port metrics")
        annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
        wanted = {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(METRICS_PORT),
            "prometheus.io/path": "/metrics",
        }
        for key, value in wanted.items():
            if annotations.get(key) != value:
                problems.append(f"{where}: pod annotation {key} is not {value!r}")
    for queue in sorted(set(QUEUES.values()) - consumed):
        problems.append(f"no worker Deployment consumes {queue}")
    return problems


def api_problems(objects: list[Obj]) -> list[str]:
    """The API must take its token from the Secret and be ready only when /v1/health is."""
    api = named(objects, "Deployment", "memsync-api")
    if api is None:
        return ["no Deployment memsync-api"]
    (container,) = api["spec"]["template"]["spec"]["containers"]
    problems = []
    if container.get("command", [])[:2] != ["memsync", "serve"]:
        problems.append("memsync-api does not run `memsync serve`")
    if secret_env(container).get("MEMSYNC_API_TOKEN") != (SECRET_NAME, "api-token"):
        problems.append("memsync-api: MEMSYNC_API_TOKEN is not from the Secret")
    http = (container.get("readinessProbe") or {}).get("httpGet") or {}
    if http.get("path") != "/v1/health":
        problems.append("memsync-api: readiness is not httpGet /v1/health")
    ports = {port.get("name"): port["containerPort"] for port in container.get("ports", [])}
    if ports.get(http.get("port")) != API_PORT and http.get("port") != API_PORT:
        problems.append(f"memsync-api: readiness probe is not on port {API_PORT}")
    return problems


SECRET_NAMES = re.compile(r"PASSWORD|TOKEN|SECRET|API_KEY|BROKER_URL|_AUTH$")


def config_problems(objects: list[Obj]) -> list[str]:
    """ConfigMaps holding secrets (a password-bearing URL included), MEMSYNC_* names that are
    no setting (memsync ignores them silently), and delivery settings that would duplicate or
    lose work."""
    problems = []
    for config in kind(objects, "ConfigMap"):
        data = {k: str(v) for k, v in (config.get("data") or {}).items()}
        for key, value in data.items():
            if SECRET_NAMES.search(key.upper()):
                problems.append(f"{ident(config)}: {key} belongs in a Secret")
            if "://" in value and urlsplit(value).password:
                problems.append(f"{ident(config)}: {key} carries a password")
        for name, close in unknown_variables(data):
            problems.append(f"{ident(config)}: {name} is no setting (did you mean {close}?)")
    data = config_data(objects)
    fields = Settings.model_fields
    values = {
        key.removeprefix("MEMSYNC_").lower(): value
        for key, value in data.items()
        if key.removeprefix("MEMSYNC_").lower() in fields
    }
    # model_validate, unlike the constructor, reads no MEMSYNC_* variable of this process.
    settings = Settings.model_validate(values)
    problems.extend(f"ConfigMap/memsync: {p}" for p in delivery_problems(celery_config(settings)))
    return problems


def reference_problems(objects: list[Obj], secret: Obj) -> list[str]:
    """Selectors and names that point at nothing: PDBs and Services must select pods of an
    existing workload (PDBs a Deployment's), Secret and ConfigMap references must exist."""
    problems = []
    deployments = kind(objects, "Deployment")
    workloads = [*deployments, *kind(objects, "StatefulSet")]

    def pod_labels(obj: Obj) -> dict[str, str]:
        labels: dict[str, str] = obj["spec"]["template"]["metadata"].get("labels") or {}
        return labels

    for pdb in kind(objects, "PodDisruptionBudget"):
        selector = pdb["spec"].get("selector", {}).get("matchLabels") or {}
        if not any(selects(selector, pod_labels(d)) for d in deployments):
            problems.append(f"{ident(pdb)}: selects no Deployment's pods")
    for service in kind(objects, "Service"):
        selector = service["spec"].get("selector") or {}
        targets = [w for w in workloads if selects(selector, pod_labels(w))]
        if not targets:
            problems.append(f"{ident(service)}: selects no workload's pods")
        named_ports = {
            port.get("name")
            for w in targets
            for c in w["spec"]["template"]["spec"]["containers"]
            for port in c.get("ports", [])
        }
        for port in service["spec"].get("ports", []):
            target = port.get("targetPort", port["port"])
            if isinstance(target, str) and target not in named_ports:
                problems.append(f"{ident(service)}: targetPort {target} names no container port")
    for statefulset in kind(objects, "StatefulSet"):
        if named(objects, "Service", statefulset["spec"]["serviceName"]) is None:
            problems.append(f"{ident(statefulset)}: serviceName names no Service")
    for deployment in deployments:
        selector = deployment["spec"]["selector"].get("matchLabels") or {}
        if not selects(selector, pod_labels(deployment)):
            problems.append(f"{ident(deployment)}: selector does not match its own pods")
    keys = set(secret.get("stringData") or {}) | set(secret.get("data") or {})
    for owner, pod in pod_specs(objects):
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            for variable, (name, key) in secret_env(container).items():
                if name != secret["metadata"]["name"] or key not in keys:
                    problems.append(f"{ident(owner)}: {variable} reads {name}/{key}, not in it")
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef")
                if ref and named(objects, "ConfigMap", ref["name"]) is None:
                    problems.append(f"{ident(owner)}: envFrom names no ConfigMap {ref['name']}")
    return problems


def secret_problems(objects: list[Obj], secret: Obj) -> list[str]:
    """The Secret template must hold placeholders only, agree with itself, and stay out of
    the kustomization (applying it would overwrite the real credentials)."""
    problems = []
    if kind(objects, "Secret"):
        problems.append("a Secret is part of the kustomization")
    values = {k: str(v) for k, v in (secret.get("stringData") or {}).items()}
    for key in ("redis-password", "broker-url", "neo4j-password", "api-token"):
        if key not in values:
            problems.append(f"Secret template: no {key}")
        elif key != "broker-url" and "replace" not in values[key]:
            problems.append(f"Secret template: {key} is not marked as a placeholder")
    broker = urlsplit(values.get("broker-url", ""))
    if broker.password != values.get("redis-password"):
        problems.append("Secret template: broker-url does not carry redis-password")
    return problems


def redis_problems(objects: list[Obj]) -> list[str]:
    """Redis must keep an AOF on a persistent volume and require the Secret's password."""
    redis = named(objects, "StatefulSet", "redis")
    if redis is None:
        return ["no StatefulSet redis"]
    problems = []
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    command = [*container.get("command", []), *container.get("args", [])]
    flags = dict(zip(command[1::2], command[2::2], strict=False))
    if flags.get("--appendonly") != "yes":
        problems.append("redis: --appendonly is not yes")
    if flags.get("--appendfsync") not in {"everysec", "always"}:
        problems.append("redis: --appendfsync is neither everysec nor always")
    password = flags.get("--requirepass", "")
    variable = password.removeprefix("$(").removesuffix(")")
    if secret_env(container).get(variable) != (SECRET_NAME, "redis-password"):
        problems.append("redis: --requirepass is not the Secret's redis-password")
    problems.extend(f"redis: {p}" for p in volume_claim_problems(redis, container, "/data"))
    return problems


def neo4j_problems(objects: list[Obj]) -> list[str]:
    """Neo4j must be 5.26 Community on a persistent volume, its password from the Secret."""
    neo4j = named(objects, "StatefulSet", "neo4j")
    if neo4j is None:
        return ["no StatefulSet neo4j"]
    problems = []
    (container,) = neo4j["spec"]["template"]["spec"]["containers"]
    _, tag, _ = split_image(container["image"])
    if not re.fullmatch(r"5\.26\.\d+-community", tag or ""):
        problems.append(f"neo4j: image {container['image']} is not 5.26.x Community")
    auth = effective_env(objects, container).get("NEO4J_AUTH", "")
    variable = auth.removeprefix("neo4j/$(").removesuffix(")")
    if secret_env(container).get(variable) != (SECRET_NAME, "neo4j-password"):
        problems.append("neo4j: NEO4J_AUTH is not neo4j/ and the Secret's neo4j-password")
    env = effective_env(objects, container)
    for setting in ("NEO4J_server_memory_heap_max__size", "NEO4J_server_memory_pagecache_size"):
        if setting not in env:
            problems.append(f"neo4j: {setting} is not set")
    problems.extend(f"neo4j: {p}" for p in volume_claim_problems(neo4j, container, "/data"))
    return problems


def volume_claim_problems(statefulset: Obj, container: Obj, path: str) -> list[str]:
    """`path` must be mounted from a volumeClaimTemplate, so the data outlives the pod."""
    claims = {c["metadata"]["name"] for c in statefulset["spec"].get("volumeClaimTemplates", [])}
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    if mounts.get(path) not in claims:
        return [f"{path} is not on a PersistentVolumeClaim (volumeClaimTemplates)"]
    return []


SCALED_OBJECT_FIELDS = {
    "scaleTargetRef",
    "minReplicaCount",
    "maxReplicaCount",
    "pollingInterval",
    "cooldownPeriod",
    "idleReplicaCount",
    "initialCooldownPeriod",
    "fallback",
    "advanced",
    "triggers",
}
REDIS_TRIGGER_METADATA = {
    "listName",
    "listLength",
    "activationListLength",
    "databaseIndex",
    "enableTLS",
    "unsafeSsl",
    "address",
    "host",
    "port",
}
AUTH_PARAMETERS = {"address", "host", "port", "username", "password"}


def keda_problems(objects: list[Obj], secret: Obj) -> list[str]:
    """KEDA objects, checked by structure (no schema to be had): every worker Deployment is
    scaled on the Redis list of the very queue it consumes, with credentials KEDA can read."""
    problems = []
    keys = set(secret.get("stringData") or {}) | set(secret.get("data") or {})
    auths = {}
    for auth in kind(objects, "TriggerAuthentication"):
        auths[auth["metadata"]["name"]] = auth
        if auth["apiVersion"] != "keda.sh/v1alpha1":
            problems.append(f"{ident(auth)}: apiVersion is not keda.sh/v1alpha1")
        for ref in auth["spec"].get("secretTargetRef", []):
            if ref.get("parameter") not in AUTH_PARAMETERS:
                problems.append(f"{ident(auth)}: unknown parameter {ref.get('parameter')}")
            if ref.get("name") != secret["metadata"]["name"] or ref.get("key") not in keys:
                problems.append(f"{ident(auth)}: {ref.get('name')}/{ref.get('key')} not in Secret")
    workers = {deployment["metadata"]["name"]: c for deployment, c in worker_deployments(objects)}
    scaled = set()
    for scaler in kind(objects, "ScaledObject"):
        where = ident(scaler)
        spec = scaler.get("spec") or {}
        if scaler["apiVersion"] != "keda.sh/v1alpha1":
            problems.append(f"{where}: apiVersion is not keda.sh/v1alpha1")
        unknown = sorted(set(spec) - SCALED_OBJECT_FIELDS)
        if unknown:
            problems.append(f"{where}: unknown spec fields {unknown}")
        target = spec.get("scaleTargetRef") or {}
        container = workers.get(target.get("name", ""))
        if target.get("kind", "Deployment") != "Deployment" or container is None:
            problems.append(f"{where}: scaleTargetRef is no worker Deployment")
            continue
        scaled.add(target["name"])
        low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
            problems.append(f"{where}: replicas must be integers with 1 <= min <= max")
        triggers = spec.get("triggers") or []
        if len(triggers) != 1 or triggers[0].get("type") != "redis":
            problems.append(f"{where}: expected one trigger of type redis")
            continue
        metadata = triggers[0].get("metadata") or {}
        if sorted(set(metadata) - REDIS_TRIGGER_METADATA):
            problems.append(f"{where}: unknown redis trigger metadata")
        if any(not isinstance(value, str) for value in metadata.values()):
            problems.append(f"{where}: trigger metadata values must be strings")
        if [metadata.get("listName")] != worker_queues(container):
            problems.append(
                f"{where}: listName {metadata.get('listName')} is not the queue "
                f"{worker_queues(container)} its Deployment consumes"
            )
        if not re.fullmatch(r"[1-9]\d*", str(metadata.get("listLength", ""))):
            problems.append(f"{where}: listLength must be a positive integer string")
        ref = (triggers[0].get("authenticationRef") or {}).get("name")
        if ref not in auths:
            problems.append(f"{where}: authenticationRef names no TriggerAuthentication")
    for name in sorted(set(workers) - scaled):
        problems.append(f"Deployment/{name}: no ScaledObject")
    return problems


def all_problems(objects: list[Obj], secret: Obj, project_version: str) -> list[str]:
    """Every invariant check on the rendered objects (the schemas are checked on their own)."""
    return [
        *image_problems(objects, project_version),
        *grace_problems(objects),
        *workload_problems(objects),
        *worker_problems(objects),
        *api_problems(objects),
        *config_problems(objects),
        *reference_problems(objects, secret),
        *secret_problems(objects, secret),
        *redis_problems(objects),
        *neo4j_problems(objects),
        *keda_problems(objects, secret),
    ]


# -- compose, the image, the lock ------------------------------------------------------------------


def seconds(duration: str) -> int:
    """A compose duration such as 330s or 5m30s, in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+)([hms])", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a duration: {duration}")
    return sum(int(number) * units[unit] for number, unit in parts)


# What an operator sets for compose (deploy/docker-compose.yml's first lines say so).
COMPOSE_ENV = {
    "REDIS_PASSWORD": "sample-redis-password",
    "NEO4J_PASSWORD": "sample-neo4j-password",
    "MEMSYNC_API_TOKEN": "sample-api-token",
}


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error} substitution ($$ is a dollar)."""

    def substitute(match: re.Match[str]) -> str:
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if operator == ":?":
            raise KeyError(f"{name} is required: {argument}")
        return argument or ""

    text = re.sub(r"\$\{(\w+)(?:(:[?-])([^}]*))?\}", substitute, text)
    return text.replace("$$", "$")


def compose_problems(compose: Obj) -> list[str]:
    """Compose services missing, ports published beyond loopback, Redis without an AOF or a
    password, workers stopped before their tasks may end."""
    problems = []
    services: dict[str, Obj] = compose.get("services") or {}
    for needed in ("redis", "neo4j", "graph-init", "worker", "embedder", "api"):
        if needed not in services:
            problems.append(f"no service {needed}")
    for name, service in services.items():
        image = str(service.get("image", ""))
        if image and (split_image(image)[1] in {None, "latest"}) and "@" not in image:
            problems.append(f"{name}: image {image} is not pinned")
        for port in service.get("ports", []):
            text = str(port)
            if not text.startswith("127.0.0.1:"):
                problems.append(f"{name}: port {text} is not bound to 127.0.0.1")
            if text.endswith(f":{METRICS_PORT}"):
                problems.append(f"{name}: the metrics port is published")
        command = service.get("command") or []
        if command[:2] == ["memsync", "worker"]:
            grace = seconds(str(service.get("stop_grace_period", "10s")))
            environment = service.get("environment") or {}
            limit = int(environment.get("MEMSYNC_TASK_TIME_LIMIT", DEFAULT_TASK_TIME_LIMIT))
            if grace <= limit:
                problems.append(f"{name}: stop_grace_period {grace}s is not above {limit}s")
        for key, value in (service.get("environment") or {}).items():
            if key == "MEMSYNC_BROKER_URL" and not urlsplit(str(value)).password:
                problems.append(f"{name}: the broker URL carries no password")
    redis = services.get("redis") or {}
    command = [str(part) for part in redis.get("command") or []]
    flags = dict(zip(command[1::2], command[2::2], strict=False))
    if flags.get("--appendonly") != "yes":
        problems.append("redis: --appendonly is not yes")
    if not flags.get("--requirepass"):
        problems.append("redis: no --requirepass")
    for name, service in services.items():
        broker = (service.get("environment") or {}).get("MEMSYNC_BROKER_URL")
        if broker and urlsplit(str(broker)).password != flags.get("--requirepass"):
            problems.append(f"{name}: the broker URL's password is not Redis' --requirepass")
    return problems


def lock_problems(requirements: list[str], lock: str) -> list[str]:
    """Requirements of pyproject.toml not pinned exactly, with hashes, in the lock file."""
    pinned: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock):
        head = block.split("\\", 1)[0].strip()
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", head)
        if match and "--hash=sha256:" in block:
            pinned[canonicalize_name(match.group(1))] = match.group(2)
    problems = []
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name not in pinned:
            problems.append(f"{requirement.name} is not pinned with hashes in the lock")
        elif not requirement.specifier.contains(pinned[name], prereleases=True):
            problems.append(f"{requirement.name}=={pinned[name]} is outside {requirement}")
    return problems


def dockerfile_problems(text: str) -> list[str]:
    """An unpinned base, or dependencies installed other than from the hashed lock."""
    problems = []
    bases = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    if not bases or not all(
        re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", b) for b in bases
    ):
        problems.append(f"base {bases} is not python:3.11.<patch>-slim-bookworm")
    logical = re.sub(r"\s*\\\n\s*", " ", text)  # continuation lines joined
    run = " ".join(re.findall(r"^RUN\s+(.*)$", logical, flags=re.MULTILINE))
    for needed in (
        "pip install --require-hashes -r deploy/requirements.lock",
        "pip install --no-deps --require-hashes -r deploy/requirements-model.txt",
        "pip install --no-deps --no-build-isolation .",
    ):
        if needed not in run:
            problems.append(f"no `{needed}`")
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    if not users or users[-1].split(":")[0] in {"0", "root"} or not users[-1][0].isdigit():
        problems.append("the image does not end on a numeric non-root USER")
    return problems
