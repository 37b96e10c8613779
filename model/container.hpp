#pragma once
// Who owns a cgroup: the container and pod a cgroup v2 path names, as container runtimes and
// the kubelet lay them out. Pure string work; the path itself comes from collect/cgroups.
#include <string>
#include <string_view>

namespace iouscope {

struct ContainerIdentity {
    // "containerd://<id>", "cri-o://<id>", "docker://<id>", "podman://<id>": the form of
    // kube-state-metrics' kube_pod_container_info{container_id}. The bare 64-hex id where the
    // path does not name the runtime (the kubelet's cgroupfs driver). Empty outside a container.
    std::string container_id;
    std::string runtime;  // containerd, cri-o, docker, podman; empty if not named by the path
    std::string pod_uid;  // with dashes, as the API server writes it; empty outside a pod
};

// Reads the innermost container scope and the pod slice or directory of `path`, e.g.
//   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/
//       cri-containerd-<id>.scope                   (systemd driver; '_' for '-' in the uid)
//   /kubepods/besteffort/pod<uid>/<id>              (cgroupfs driver)
//   /system.slice/docker-<id>.scope, /docker/<id>, /machine.slice/libpod-<id>.scope
ContainerIdentity container_of_cgroup(std::string_view path);

}  // namespace iouscope
