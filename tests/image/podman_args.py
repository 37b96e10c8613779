"""deploy/kubernetes/daemonset.yaml's privileges as podman run flags, field by field.

A field that grants or takes away something and that this translation does not know makes it
fail (Unknown), so that the image test can never run the daemon with privileges the DaemonSet
does not give, nor miss one it does. Fields that only schedule, probe or label the pod change
nothing a container on one host can see, and are passed over by name (IGNORED)."""
import yaml

# Pod and container fields with no bearing on what the process may do on the node.
IGNORED_POD = {"serviceAccountName", "automountServiceAccountToken", "enableServiceLinks",
               "nodeSelector", "tolerations", "terminationGracePeriodSeconds", "containers",
               "volumes", "hostPID", "hostNetwork"}
IGNORED_CONTAINER = {"name", "image", "imagePullPolicy", "args", "ports", "securityContext",
                     "resources", "startupProbe", "readinessProbe", "livenessProbe",
                     "volumeMounts"}
SECURITY = {"privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsUser",
            "runAsGroup", "runAsNonRoot", "capabilities", "seccompProfile"}


class Unknown(ValueError):
    pass


def daemonset(path):
    """(pod spec, its one container) of the DaemonSet in PATH."""
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "DaemonSet"]
    if len(docs) != 1:
        raise Unknown(f"{path}: {len(docs)} DaemonSets, expected 1")
    pod = docs[0]["spec"]["template"]["spec"]
    if len(pod["containers"]) != 1:
        raise Unknown(f"{path}: {len(pod['containers'])} containers, expected 1")
    return pod, pod["containers"][0]


def _known(fields, allowed, where):
    extra = set(fields) - allowed
    if extra:
        raise Unknown(f"{where}: {', '.join(sorted(extra))} not translated to podman")


def _memory(quantity):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[:-2]) * factor
    return int(quantity)


def _security(sc):
    _known(sc, SECURITY, "securityContext")
    if sc.get("privileged"):
        raise Unknown("securityContext.privileged: the image test runs unprivileged only")
    args = []
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        # podman would add tmpfs on /tmp, /run and /var/tmp; Kubernetes adds none.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if "runAsUser" in sc:
        args += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
    caps = sc.get("capabilities") or {}
    _known(caps, {"add", "drop"}, "securityContext.capabilities")
    args += [f"--cap-drop={c}" for c in caps.get("drop", [])]
    args += [f"--cap-add={c}" for c in caps.get("add", [])]
    seccomp = (sc.get("seccompProfile") or {}).get("type", "RuntimeDefault")
    if seccomp == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    elif seccomp != "RuntimeDefault":
        raise Unknown(f"seccompProfile.type {seccomp} not translated to podman")
    return args


def _volumes(pod, container):
    paths = {}
    for v in pod.get("volumes", []):
        _known(v, {"name", "hostPath"}, f"volume {v.get('name')}")
        paths[v["name"]] = v["hostPath"]["path"]
    args = []
    for m in container.get("volumeMounts", []):
        _known(m, {"name", "mountPath", "readOnly"}, f"volumeMount {m.get('name')}")
        mode = "ro" if m.get("readOnly") else "rw"
        args += ["-v", f"{paths[m['name']]}:{m['mountPath']}:{mode}"]
    return args


def podman_args(pod, container, host_port):
    """podman run flags granting what POD and CONTAINER grant; the container's first port is
    published on 127.0.0.1:HOST_PORT (the pod network stands for the pod's IP)."""
    _known(pod, IGNORED_POD, "pod spec")
    _known(container, IGNORED_CONTAINER, "container")
    args = ["--pid", "host"] if pod.get("hostPID") else []
    if pod.get("hostNetwork"):
        args += ["--network", "host"]
    else:
        port = container["ports"][0]["containerPort"]
        args += ["-p", f"127.0.0.1:{host_port}:{port}"]
    args += _security(container.get("securityContext") or {})
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit:
        args += ["--memory", str(_memory(limit))]
    return args + _volumes(pod, container)


def grace_seconds(pod):
    return int(pod.get("terminationGracePeriodSeconds", 30))
