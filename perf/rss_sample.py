#!/usr/bin/env python3
"""Samples one local broker's memory every INTERVAL_S for DURATION_S, one JSON line each:
/proc/PID/status (VmRSS, RssAnon, RssFile, threads), /proc/PID/smaps_rollup, open files, and
the /metrics lines about caches, buffers, connections and partitions (admin port = PORT + 1,
as perf/soak.py starts it). Used beside perf/soak.py for issue 19's RSS investigation
(perf/results/2026-12-02-rss.md).

    perf/rss_sample.py PORT OUTFILE INTERVAL_S DURATION_S
"""
import json, os, socket, subprocess, sys, time
port, out, every, dur = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
def pid():
    r = subprocess.run(["pgrep", "-f", f"serve --listen 127.0.0.1:{port}"], capture_output=True, text=True)
    ps = [int(x) for x in r.stdout.split()]
    return ps[0] if ps else None
def metrics():
    try:
        with socket.create_connection(("127.0.0.1", port + 1), timeout=2) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            body = b""
            while chunk := s.recv(65536):
                body += chunk
    except OSError:
        return {}
    m = {}
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("#"): continue
        if any(w in line for w in ("cache", "buffer", "dma", "memory", "bytes_in_flight", "queued", "connections", "partitions")):
            k, _, v = line.rpartition(" ")
            try: m[k] = float(v)
            except ValueError: pass
    return m
t0 = time.time()
with open(out, "a") as f:
    while time.time() - t0 < dur:
        p = pid()
        if p:
            rec = {"t": round(time.time() - t0, 1), "pid": p}
            try:
                for line in open(f"/proc/{p}/status"):
                    k = line.split(":")[0]
                    if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmLck", "Threads", "VmData"):
                        rec[k] = int(line.split()[1]) if k != "Threads" else int(line.split()[1])
                for line in open(f"/proc/{p}/smaps_rollup"):
                    parts = line.split()
                    if len(parts) >= 3 and parts[-1] == "kB":
                        rec["smaps_" + parts[0].rstrip(":")] = int(parts[1])
                rec["fds"] = len(os.listdir(f"/proc/{p}/fd"))
            except (FileNotFoundError, ProcessLookupError):
                pass
            rec["m"] = metrics()
            f.write(json.dumps(rec) + "\n"); f.flush()
        time.sleep(every)
