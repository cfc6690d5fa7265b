"""Three real `shardlog` processes for the fault matrix (issue 15), each in its own network
namespace when the host allows it (root, `ip netns`): namespace `flt-nI` holds broker I on
10.77.0.I, joined by a veth pair to the bridge `flbr0` in the root namespace, which holds
10.77.0.254 so the clients (run in the root namespace) reach every broker. Dropping one
node's links or filtering them with nftables isolates that node alone, which rules on a
shared 127.0.0.1 cannot. Without namespaces the brokers run on 127.0.0.1 (ports from the
caller's block) and the network-cut fault is skipped.

Each broker: its own data dir (optionally a loop-mounted small ext4 image, for the disk-full
fault), one shard pinned to core `id % cores`, no spinning, so three brokers share two cores.
"""

import os
import signal
import socket
import subprocess
import time

BRIDGE = "flbr0"
SUBNET = "10.77.0"
CLIENT_IP = f"{SUBNET}.254"


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def netns_possible():
    if os.geteuid() != 0:
        return False, "not root"
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if r.returncode != 0:
        return False, "no `ip netns` (install iproute2)"
    return True, ""


def wait_port(host, port, limit_s):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class Ext4:
    """A small ext4 image, loop-mounted at `mnt`; `fill()` leaves no free block."""

    def __init__(self, root, name, size_mib):
        self.img = os.path.join(root, f"{name}.img")
        self.mnt = os.path.join(root, name)
        os.makedirs(self.mnt, exist_ok=True)
        sh("truncate", "-s", f"{size_mib}M", self.img)
        sh("mkfs.ext4", "-q", "-F", "-m", "0", self.img)
        sh("mount", "-o", "loop", self.img, self.mnt)
        self.ballast = os.path.join(self.mnt, "ballast")

    def fill(self):
        st = os.statvfs(self.mnt)
        free = st.f_bavail * st.f_frsize
        sh("fallocate", "-l", str(max(free, 4096)), self.ballast, check=False)
        # Whatever fallocate left (metadata rounding), plain writes take.
        with open(self.ballast + "2", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass

    def free(self):
        for p in (self.ballast, self.ballast + "2"):
            if os.path.exists(p):
                os.remove(p)

    def close(self):
        if sh("umount", self.mnt, check=False).returncode != 0:
            sh("umount", "-l", self.mnt, check=False)


class Node:
    def __init__(self, nid, data_dir, host, port, cport, ns):
        self.id = nid
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.cport = cport
        self.ns = ns
        self.proc = None
        self.log = None
        self.disk = None

    @property
    def addr(self):
        return f"{self.host}:{self.port}"

    def running(self):
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    def __init__(self, binary, root, base_port, use_netns, disk_images=False, extra=()):
        self.bin = binary
        self.root = root
        self.use_netns = use_netns
        self.extra = list(extra)
        self.cores = os.cpu_count() or 1
        self.nodes = []
        cid = sh(binary, "format", "--print-random-uuid").stdout.strip()
        for nid in (1, 2, 3):
            if use_netns:
                host, port, cport, ns = f"{SUBNET}.{nid}", base_port + 92, base_port + 93, f"flt-n{nid}"
            else:
                host, port, cport, ns = "127.0.0.1", base_port + nid, base_port + 10 + nid, None
            node = Node(nid, os.path.join(root, f"node-{nid}"), host, port, cport, ns)
            if disk_images:
                # The broker refuses to start with < 256 MiB free.
                node.disk = Ext4(root, f"disk-{nid}", 320)
                node.data_dir = os.path.join(node.disk.mnt, "data")
            self.nodes.append(node)
        self.voters = ",".join(f"{n.id}@{n.host}:{n.cport}" for n in self.nodes)
        if use_netns:
            self._net_up()
        for n in self.nodes:
            sh(binary, "format", "--cluster-id", cid, "--node-id", str(n.id), "--data-dir", n.data_dir)

    # ---- network namespaces -------------------------------------------------------------
    def _net_up(self):
        self._net_down()
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{CLIENT_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for n in self.nodes:
            sh("ip", "netns", "add", n.ns)
            sh("ip", "link", "add", f"flv{n.id}", "type", "veth", "peer", "name", "eth0", "netns", n.ns)
            sh("ip", "link", "set", f"flv{n.id}", "master", BRIDGE, "up")
            sh("ip", "-n", n.ns, "addr", "add", f"{n.host}/24", "dev", "eth0")
            sh("ip", "-n", n.ns, "link", "set", "eth0", "up")
            sh("ip", "-n", n.ns, "link", "set", "lo", "up")

    def _net_down(self):
        for nid in (1, 2, 3):
            sh("ip", "netns", "del", f"flt-n{nid}", check=False)
            sh("ip", "link", "del", f"flv{nid}", check=False)
        sh("ip", "link", "del", BRIDGE, check=False)

    def isolate(self, node, how):
        """Cuts `node` off from the other brokers: `link` drops its veth (clients lose it
        too), `nft` drops only broker<->broker traffic in its namespace (clients still reach
        it: the split-brain case)."""
        if how == "link":
            sh("ip", "link", "set", f"flv{node.id}", "down")
        else:
            others = ", ".join(n.host for n in self.nodes if n is not node)
            rules = (
                "table inet flt {\n"
                "  chain i { type filter hook input priority 0; policy accept;\n"
                f"    ip saddr {{ {others} }} drop\n  }}\n"
                "  chain o { type filter hook output priority 0; policy accept;\n"
                f"    ip daddr {{ {others} }} drop\n  }}\n"
                "}\n"
            )
            r = subprocess.run(["ip", "netns", "exec", node.ns, "nft", "-f", "-"], input=rules,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"nft: {r.stderr.strip()}")

    def heal(self, node, how):
        if how == "link":
            sh("ip", "link", "set", f"flv{node.id}", "up")
        else:
            sh("ip", "netns", "exec", node.ns, "nft", "delete", "table", "inet", "flt", check=False)

    # ---- processes ----------------------------------------------------------------------
    def bootstrap(self):
        return ",".join(n.addr for n in self.nodes)

    def node(self, nid):
        return self.nodes[nid - 1]

    def _cmd(self, n):
        cmd = [
            self.bin, "serve", "--node-id", str(n.id), "--data-dir", n.data_dir,
            "--listen", n.addr, "--admin-listen", "127.0.0.1:0",
            "--controller-quorum-voters", self.voters, "--controller-listen", f"{n.host}:{n.cport}",
            "--shards", "1", "--cpus", str(n.id % self.cores), "--spin-before-park-us", "0",
            "--log-level", os.environ.get("FAULTS_LOG_LEVEL", "warn"),
        ] + self.extra
        if n.ns:
            cmd = ["ip", "netns", "exec", n.ns] + cmd
        return cmd

    def start(self, nids=None, wait_s=60):
        nids = nids or [n.id for n in self.nodes]
        for nid in nids:
            n = self.node(nid)
            n.log = open(os.path.join(self.root, f"node-{nid}.log"), "ab")
            n.log.write(f"--- start {time.strftime('%H:%M:%S')}\n".encode())
            n.log.flush()
            # `ip netns exec` execs the broker, so the pid is the broker's own.
            n.proc = subprocess.Popen(self._cmd(n), stdout=n.log, stderr=n.log, stdin=subprocess.DEVNULL)
        for nid in nids:
            n = self.node(nid)
            if not wait_port(n.host, n.port, wait_s):
                raise RuntimeError(f"broker {nid} not listening after {wait_s}s (log {self.root}/node-{nid}.log)")

    def signal(self, nid, sig):
        n = self.node(nid)
        if n.running():
            os.kill(n.proc.pid, sig)

    def kill(self, nid):
        n = self.node(nid)
        if n.proc is not None:
            if n.proc.poll() is None:
                n.proc.send_signal(signal.SIGKILL)
            n.proc.wait()
            n.proc = None

    def stop(self, nid, limit_s=30):
        """SIGTERM (controlled shutdown), SIGKILL after `limit_s`."""
        n = self.node(nid)
        if n.proc is None:
            return
        if n.proc.poll() is None:
            n.proc.send_signal(signal.SIGCONT)
            n.proc.send_signal(signal.SIGTERM)
            try:
                n.proc.wait(limit_s)
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait()
        n.proc = None

    def close(self):
        for n in self.nodes:
            self.kill(n.id)
            if n.disk:
                n.disk.close()
        if self.use_netns:
            self._net_down()

    def tail(self, nid, lines=20):
        path = os.path.join(self.root, f"node-{nid}.log")
        try:
            with open(path, "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""
