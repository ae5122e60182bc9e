"""Offline checks of the deployment in deploy/: no cluster, no Docker, no network.

Every invariant (tests/deployment.py) is run on the real files here and, mutated in memory, on
broken copies, so each check is shown to fail when it should.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from memsync.settings import Settings
from tests.deployment import (
    COMPOSE_ENV,
    DEPLOY,
    K8S,
    KEDA,
    KUBERNETES_VERSIONS,
    QUEUES,
    ROOT,
    Obj,
    RenderError,
    all_problems,
    compose_problems,
    dockerfile_problems,
    ident,
    interpolate,
    kind,
    load_documents,
    lock_problems,
    named,
    render,
    schema_problems,
    secret_problems,
    split_image,
)
from workers.worker.config import celery_config

# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pyproject() -> Obj:
    with (ROOT / "pyproject.toml").open("rb") as stream:
        return tomllib.load(stream)


@pytest.fixture(scope="module")
def project_version(pyproject: Obj) -> str:
    version: str = pyproject["project"]["version"]
    return version


@pytest.fixture(scope="module")
def rendered() -> list[Obj]:
    """The base and the KEDA kustomization on top of it, as a cluster with KEDA gets them."""
    return [*render(K8S), *render(KEDA)]


@pytest.fixture
def objects(rendered: list[Obj]) -> list[Obj]:
    """A private copy of the rendered base, free to mutate."""
    return copy.deepcopy(rendered)


@pytest.fixture(scope="module")
def secret() -> Obj:
    (template,) = load_documents(K8S / "secret.example.yaml")
    return template


@pytest.fixture
def compose() -> Obj:
    """The compose file as `docker compose` reads it, given the variables it documents."""
    text = interpolate((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"), COMPOSE_ENV)
    document = yaml.safe_load(text)
    assert isinstance(document, dict)
    return document


# -- the loader's own tests ------------------------------------------------------------------------


def test_loader_applies_namespace_and_images(tmp_path: Path) -> None:
    """Namespace on namespaced objects (a Namespace renamed), images overridden, nested bases."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text("resources: [app.yaml]\n")
    (base / "app.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: old}\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
        "      initContainers: [{name: i, image: 'reg:5000/app:1'}]\n"
        "      containers: [{name: c, image: app:1}, {name: d, image: other:2}]\n"
    )
    digest = "sha256:" + "a" * 64
    (tmp_path / "kustomization.yaml").write_text(
        "namespace: prod\nresources: [base]\nimages:\n"
        f"  - {{name: app, newTag: '2'}}\n  - {{name: 'reg:5000/app', digest: '{digest}'}}\n"
    )
    namespace, job = render(tmp_path)
    assert namespace["metadata"] == {"name": "prod"}
    assert job["metadata"]["namespace"] == "prod"
    spec = job["spec"]["template"]["spec"]
    assert [c["image"] for c in spec["containers"]] == ["app:2", "other:2"]
    assert spec["initContainers"][0]["image"] == f"reg:5000/app@{digest}"


def test_loader_refuses_what_it_cannot_render(tmp_path: Path) -> None:
    """A kustomize feature the loader ignores would make the checks pass on the wrong objects."""
    (tmp_path / "kustomization.yaml").write_text("resources: []\npatches: []\n")
    with pytest.raises(RenderError, match="patches"):
        render(tmp_path)


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("memsync:0.1.0", ("memsync", "0.1.0", None)),
        ("localhost:5000/memsync", ("localhost:5000/memsync", None, None)),
        ("r.io/m:1@sha256:ab", ("r.io/m", "1", "sha256:ab")),
    ],
)
def test_split_image(image: str, expected: tuple[str, str | None, str | None]) -> None:
    """A registry's port is not a tag."""
    assert split_image(image) == expected


# -- the deployment as it is -----------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_core_objects_match_the_kubernetes_schemas(rendered: list[Obj], version: str) -> None:
    """Every object but KEDA's passes the strict schema (unknown fields are errors)."""
    assert schema_problems(rendered, version) == []


def test_secret_template_matches_the_secret_schema(secret: Obj) -> None:
    """The template is applied by hand (or copied into a generator): it must be valid too."""
    assert schema_problems([secret], KUBERNETES_VERSIONS[0]) == []


def test_the_base_applies_without_keda() -> None:
    """A cluster without KEDA's CRDs refuses its objects: they are only in keda/."""
    assert [ident(o) for o in render(K8S) if o["apiVersion"].startswith("keda.sh/")] == []
    assert {o["apiVersion"] for o in render(KEDA)} == {"keda.sh/v1alpha1"}


def test_base_renders_the_expected_objects(rendered: list[Obj]) -> None:
    """Every object in the memsync namespace, and the set of them is the one documented."""
    assert {obj["metadata"].get("namespace") for obj in rendered if obj["kind"] != "Namespace"} == {
        "memsync"
    }
    assert sorted(ident(obj) for obj in kind(rendered, "Deployment")) == [
        "Deployment/memsync-api",
        "Deployment/memsync-embed",
        "Deployment/memsync-fold",
        "Deployment/memsync-ingest",
        "Deployment/memsync-sync",
    ]
    assert {ident(obj) for obj in rendered} >= {
        "Namespace/memsync",
        "ConfigMap/memsync",
        "StatefulSet/redis",
        "StatefulSet/neo4j",
        "Service/redis",
        "Service/neo4j",
        "Service/memsync-api",
        "Job/memsync-graph-init",
        "TriggerAuthentication/memsync-redis",
    }


def test_the_deployment_has_no_known_problem(
    rendered: list[Obj], secret: Obj, project_version: str
) -> None:
    """The manifests as committed pass every invariant check."""
    assert all_problems(rendered, secret, project_version) == []


def test_keda_list_names_are_the_queue_names() -> None:
    """The lists KEDA measures are the Redis keys kombu keeps pending messages in: the bare
    queue name (priority 0; memsync sets none), not a priority-suffixed sibling."""
    from kombu.transport.redis import PRIORITY_STEPS, Channel

    assert PRIORITY_STEPS[0] == 0
    assert "priority_steps" not in celery_config(Settings())["broker_transport_options"]
    channel = Channel.__new__(Channel)
    for queue in QUEUES.values():
        assert channel._q_for_pri(queue, 0) == queue  # type: ignore[attr-defined]


def test_compose_has_no_known_problem(compose: Obj) -> None:
    """Compose as committed: every service, loopback-only ports, Redis AOF and password."""
    assert compose_problems(compose) == []


def test_dockerfile_is_pinned_and_locked() -> None:
    """An exact base, hashed dependencies, the model by hash, a numeric non-root user."""
    assert dockerfile_problems((DEPLOY / "Dockerfile").read_text(encoding="utf-8")) == []


def test_every_runtime_dependency_is_locked(pyproject: Obj) -> None:
    """The image installs the lock alone (--require-hashes): a dependency added to
    pyproject.toml but not locked would be missing from it."""
    project = pyproject["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["http"]]
    lock = (DEPLOY / "requirements.lock").read_text(encoding="utf-8")
    assert lock_problems(requirements, lock) == []


# -- each check fails when it should ---------------------------------------------------------------


def container(objects: list[Obj], kind_name: str, name: str) -> Obj:
    obj = named(objects, kind_name, name)
    assert obj is not None
    first: Obj = obj["spec"]["template"]["spec"]["containers"][0]
    return first


def spec_of(objects: list[Obj], kind_name: str, name: str) -> Obj:
    obj = named(objects, kind_name, name)
    assert obj is not None
    spec: Obj = obj["spec"]
    return spec


def set_grace(objects: list[Obj]) -> None:
    spec_of(objects, "Deployment", "memsync-sync")["template"]["spec"][
        "terminationGracePeriodSeconds"
    ] = 10


def raise_time_limit(objects: list[Obj]) -> None:
    config = named(objects, "ConfigMap", "memsync")
    assert config is not None
    config["data"]["MEMSYNC_TASK_TIME_LIMIT"] = "400"


def latest_image(objects: list[Obj]) -> None:
    container(objects, "Deployment", "memsync-fold")["image"] = "memsync:latest"


def untagged_redis(objects: list[Obj]) -> None:
    container(objects, "StatefulSet", "redis")["image"] = "redis:7.2"


def no_readiness(objects: list[Obj]) -> None:
    del container(objects, "Deployment", "memsync-api")["readinessProbe"]


def no_resources(objects: list[Obj]) -> None:
    del container(objects, "Deployment", "memsync-embed")["resources"]


def root_pod(objects: list[Obj]) -> None:
    del spec_of(objects, "Deployment", "memsync-ingest")["template"]["spec"]["securityContext"]


def broker_in_config(objects: list[Obj]) -> None:
    config = named(objects, "ConfigMap", "memsync")
    assert config is not None
    config["data"]["QUEUE_URL"] = "redis://:hunter2@redis:6379/0"


def misspelt_setting(objects: list[Obj]) -> None:
    config = named(objects, "ConfigMap", "memsync")
    assert config is not None
    config["data"]["MEMSYNC_TASK_TIMELIMIT"] = "300"


def short_visibility(objects: list[Obj]) -> None:
    config = named(objects, "ConfigMap", "memsync")
    assert config is not None
    config["data"]["MEMSYNC_VISIBILITY_TIMEOUT"] = "600"


def pdb_typo(objects: list[Obj]) -> None:
    spec_of(objects, "PodDisruptionBudget", "memsync-sync")["selector"]["matchLabels"] = {
        "app.kubernetes.io/name": "memsync-synk"
    }


def service_typo(objects: list[Obj]) -> None:
    spec_of(objects, "Service", "memsync-api")["ports"][0]["targetPort"] = "web"


def missing_secret_key(objects: list[Obj]) -> None:
    env = container(objects, "Deployment", "memsync-ingest")["env"]
    env[0]["valueFrom"]["secretKeyRef"]["key"] = "broker"


def loopback_metrics(objects: list[Obj]) -> None:
    env = container(objects, "Deployment", "memsync-embed")["env"]
    env[:] = [entry for entry in env if entry["name"] != "MEMSYNC_METRICS_HOST"]


def exec_probe(objects: list[Obj]) -> None:
    container(objects, "Deployment", "memsync-fold")["livenessProbe"] = {
        "exec": {"command": ["true"]}
    }


def no_fold_worker(objects: list[Obj]) -> None:
    objects[:] = [o for o in objects if o["metadata"]["name"] != "memsync-fold"]


def scaler_wrong_list(objects: list[Obj]) -> None:
    spec_of(objects, "ScaledObject", "memsync-embed")["triggers"][0]["metadata"]["listName"] = (
        "memsync.sync"
    )


def scaler_wrong_target(objects: list[Obj]) -> None:
    spec_of(objects, "ScaledObject", "memsync-ingest")["scaleTargetRef"]["name"] = "ingest"


def scaler_integer_length(objects: list[Obj]) -> None:
    spec_of(objects, "ScaledObject", "memsync-fold")["triggers"][0]["metadata"]["listLength"] = 5


def no_aof(objects: list[Obj]) -> None:
    command = container(objects, "StatefulSet", "redis")["command"]
    command[command.index("--appendonly") + 1] = "no"


def redis_without_claim(objects: list[Obj]) -> None:
    del spec_of(objects, "StatefulSet", "redis")["volumeClaimTemplates"]


def old_neo4j(objects: list[Obj]) -> None:
    container(objects, "StatefulSet", "neo4j")["image"] = "neo4j:5.25.1-community"


def neo4j_without_claim(objects: list[Obj]) -> None:
    volumes = container(objects, "StatefulSet", "neo4j")["volumeMounts"]
    volumes[:] = [mount for mount in volumes if mount["mountPath"] != "/data"]


def api_without_token(objects: list[Obj]) -> None:
    env = container(objects, "Deployment", "memsync-api")["env"]
    env[:] = [entry for entry in env if entry["name"] != "MEMSYNC_API_TOKEN"]


def secret_in_kustomization(objects: list[Obj]) -> None:
    objects.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})


def unknown_field(objects: list[Obj]) -> None:
    container(objects, "Deployment", "memsync-api")["readinesProbe"] = {}


BREAKAGES: list[tuple[Callable[[list[Obj]], None], str]] = [
    (set_grace, "terminationGracePeriodSeconds 10 is not above MEMSYNC_TASK_TIME_LIMIT 300"),
    (raise_time_limit, "terminationGracePeriodSeconds 330 is not above MEMSYNC_TASK_TIME_LIMIT"),
    (latest_image, "memsync:latest: no version pinned"),
    (untagged_redis, "image redis:7.2: tag 7.2 is not"),
    (no_readiness, "memsync-api/api: no readinessProbe"),
    (no_resources, "memsync-embed/worker: no cpu request"),
    (root_pod, "memsync-ingest: pod securityContext lacks runAsNonRoot"),
    (broker_in_config, "QUEUE_URL carries a password"),
    (misspelt_setting, "MEMSYNC_TASK_TIMELIMIT is no setting"),
    (short_visibility, "visibility_timeout is 600s"),
    (pdb_typo, "PodDisruptionBudget/memsync-sync: selects no Deployment"),
    (service_typo, "targetPort web names no container port"),
    (missing_secret_key, "reads memsync-credentials/broker, not in it"),
    (loopback_metrics, "memsync-embed: MEMSYNC_METRICS_HOST is not 0.0.0.0"),
    (exec_probe, "livenessProbe is not httpGet /livez on port metrics"),
    (no_fold_worker, "no worker Deployment consumes memsync.fold"),
    (scaler_wrong_list, "listName memsync.sync is not the queue"),
    (scaler_wrong_target, "ScaledObject/memsync-ingest: scaleTargetRef is no worker"),
    (scaler_integer_length, "trigger metadata values must be strings"),
    (no_aof, "redis: --appendonly is not yes"),
    (redis_without_claim, "redis: /data is not on a PersistentVolumeClaim"),
    (old_neo4j, "is not 5.26.x Community"),
    (neo4j_without_claim, "neo4j: /data is not on a PersistentVolumeClaim"),
    (api_without_token, "MEMSYNC_API_TOKEN is not from the Secret"),
    (secret_in_kustomization, "a Secret is part of the kustomization"),
]


@pytest.mark.parametrize(
    ("breakage", "expected"), BREAKAGES, ids=[b.__name__ for b, _ in BREAKAGES]
)
def test_a_broken_deployment_is_reported(
    objects: list[Obj],
    secret: Obj,
    project_version: str,
    breakage: Callable[[list[Obj]], None],
    expected: str,
) -> None:
    """Each check reports the breakage it exists for, on an otherwise sound deployment."""
    breakage(objects)
    problems = all_problems(objects, secret, project_version)
    assert any(expected in p for p in problems), problems


def test_the_schemas_report_an_unknown_field(objects: list[Obj]) -> None:
    """A misspelt field is an error in the strict schemas, not silently dropped."""
    unknown_field(objects)
    problems = schema_problems(objects, KUBERNETES_VERSIONS[0])
    assert problems == [
        "Deployment/memsync-api: spec.template.spec.containers.0: "
        "Additional properties are not allowed ('readinesProbe' was unexpected)"
    ]


def test_a_broken_secret_template_is_reported(objects: list[Obj], secret: Obj) -> None:
    """A real value in the template, or a broker URL without the Redis password, is caught."""
    broken = copy.deepcopy(secret)
    broken["stringData"]["broker-url"] = "redis://redis:6379/0"
    broken["stringData"]["api-token"] = "s3cr3t"
    assert secret_problems(objects, broken) == [
        "Secret template: api-token is not marked as a placeholder",
        "Secret template: broker-url does not carry redis-password",
    ]


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda c: c["services"]["api"].update(ports=["8077:8077"]), "not bound to 127.0.0.1"),
        (lambda c: c["services"]["worker"].update(ports=["127.0.0.1:9100:9100"]), "metrics"),
        (lambda c: c["services"]["worker"].update(stop_grace_period="30s"), "30s is not above"),
        (lambda c: c["services"].pop("embedder"), "no service embedder"),
        (lambda c: c["services"]["redis"]["command"].remove("--appendonly"), "appendonly"),
        (lambda c: c["services"]["neo4j"].update(image="neo4j"), "neo4j is not pinned"),
        (
            lambda c: c["services"]["worker"]["environment"].update(
                MEMSYNC_BROKER_URL="redis://redis:6379/0"
            ),
            "carries no password",
        ),
    ],
    ids=["public-port", "metrics-port", "short-grace", "no-embedder", "no-aof", "latest", "nopw"],
)
def test_a_broken_compose_file_is_reported(
    compose: Obj, breakage: Callable[[Obj], object], expected: str
) -> None:
    """Each compose check reports the breakage it exists for."""
    breakage(compose)
    problems = compose_problems(compose)
    assert any(expected in p for p in problems), problems


def test_an_unlocked_dependency_is_reported() -> None:
    """Missing, unhashed and out-of-range pins are all reported (extras do not matter)."""
    lock = (
        "celery==5.7.0 \\\n    --hash=sha256:00\n"
        "redis==4.0.0 \\\n    --hash=sha256:11\n"
        "kombu==5.7.0\n"
    )
    assert lock_problems(["celery[redis]>=5.6", "redis>=6.1", "kombu>=5.6", "neo4j>=5"], lock) == [
        "redis==4.0.0 is outside redis>=6.1",
        "kombu is not pinned with hashes in the lock",
        "neo4j is not pinned with hashes in the lock",
    ]


def test_an_unpinned_dockerfile_is_reported() -> None:
    """A floating base tag and an install that skips the hashes are both reported."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    broken = text.replace("python:3.11.14-slim-bookworm", "python:3.11-slim").replace(
        "--require-hashes -r deploy/requirements.lock", "-r deploy/requirements.lock"
    )
    assert dockerfile_problems(broken) == [
        "base ['python:3.11-slim'] is not python:3.11.<patch>-slim-bookworm",
        "no `pip install --require-hashes -r deploy/requirements.lock`",
    ]
