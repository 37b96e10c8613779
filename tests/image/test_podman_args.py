"""tests/image/podman_args.py: the DaemonSet's privileges become podman flags, or it refuses."""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import podman_args  # noqa: E402

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
POD, CONTAINER = podman_args.daemonset(os.path.join(TOP, "deploy/kubernetes/daemonset.yaml"))


def args(pod=POD, container=CONTAINER):
    return podman_args.podman_args(pod, container, host_port=20000)


class TheDaemonSet(unittest.TestCase):
    def test_grants_exactly_its_capabilities_namespaces_and_mounts(self):
        a = args()
        self.assertEqual([x for x in a if x.startswith("--cap-")],
                         ["--cap-drop=ALL", "--cap-add=BPF", "--cap-add=PERFMON",
                          "--cap-add=SYSLOG"])
        self.assertIn("--pid", a)
        self.assertNotIn("--privileged", a)
        self.assertIn("/sys/kernel/btf:/sys/kernel/btf:ro", a)
        self.assertIn("/sys/fs/cgroup:/host/sys/fs/cgroup:ro", a)
        self.assertIn("127.0.0.1:20000:10464", a)
        for opt in ("no-new-privileges", "seccomp=unconfined"):
            self.assertIn(opt, a)
        self.assertIn("--read-only-tmpfs=false", a)
        self.assertEqual(a[a.index("--memory") + 1], str(256 << 20))

    def test_host_network_replaces_the_published_port(self):
        pod = dict(POD, hostNetwork=True)
        a = args(pod=pod)
        self.assertEqual(a[a.index("--network") + 1], "host")
        self.assertFalse(any(":10464" in x for x in a))


class Refuses(unittest.TestCase):
    def changed(self, **security):
        c = copy.deepcopy(CONTAINER)
        c["securityContext"].update(security)
        return c

    def test_a_privileged_container(self):
        with self.assertRaises(podman_args.Unknown):
            args(container=self.changed(privileged=True))

    def test_a_security_field_it_cannot_translate(self):
        with self.assertRaises(podman_args.Unknown):
            args(container=self.changed(procMount="Unmasked"))

    def test_a_pod_field_it_cannot_translate(self):
        with self.assertRaises(podman_args.Unknown):
            args(pod=dict(POD, hostIPC=True))

    def test_a_seccomp_profile_it_cannot_translate(self):
        with self.assertRaises(podman_args.Unknown):
            args(container=self.changed(seccompProfile={"type": "Localhost"}))


if __name__ == "__main__":
    unittest.main()
