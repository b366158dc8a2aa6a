# Copied from the project's anchors (shared/anchors/bench_util.py, measured 2026-11-22 on the
# 2-vCPU dev box, python3-torch 1.13.1 from Debian 12); changes: none (only this comment).
"""Small shared helpers: summary statistics, machine facts, JSON output."""
import json
import os
import platform
import statistics
import time


def stats(xs):
    """min / median / mean / max / n of a list of samples (seconds or whatever)."""
    xs = list(xs)
    return dict(n=len(xs), min=min(xs), median=statistics.median(xs),
                mean=statistics.fmean(xs), max=max(xs))


def cpu_busy_fraction(interval=1.0):
    """Fraction of total CPU time that was non-idle (incl. steal) over `interval`."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]          # idle + iowait
        return sum(v[:8]), idle, v[7]  # total, idle, steal
    t0, i0, s0 = snap()
    time.sleep(interval)
    t1, i1, s1 = snap()
    dt = max(t1 - t0, 1)
    return dict(busy=1 - (i1 - i0) / dt, steal=(s1 - s0) / dt)


def proc_stat():
    """Aggregate cpu line of /proc/stat (jiffies): user nice system idle iowait irq softirq steal."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def steal_since(start):
    """Fraction of CPU time stolen by the hypervisor since `start` (a proc_stat())."""
    now = proc_stat()
    d = [b - a for a, b in zip(start, now)]
    return d[7] / max(sum(d), 1)


def machine():
    info = dict(hostname=platform.node(), kernel=platform.release(),
                nproc=os.cpu_count(), loadavg=os.getloadavg())
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        first = txt.split("\n\n")[0]
        kv = dict(l.split(":", 1) for l in first.splitlines() if ":" in l)
        kv = {k.strip(): v.strip() for k, v in kv.items()}
        flags = kv.get("flags", "").split()
        info.update(cpu_model=kv.get("model name"), cpu_mhz=kv.get("cpu MHz"),
                    cpu_family=kv.get("cpu family"), cpu_model_id=kv.get("model"),
                    simd={f: (f in flags) for f in
                          ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")})
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_kib"] = int(f.readline().split()[1])
    except OSError:
        pass
    return info


def torch_info():
    import torch
    blas = None
    try:
        blas = os.path.realpath("/etc/alternatives/libblas.so.3-x86_64-linux-gnu")
    except OSError:
        pass
    return dict(torch=torch.__version__, mkldnn=torch.backends.mkldnn.is_available(),
                default_threads=torch.get_num_threads(), libblas=blas)


def write_json(path, obj):
    if not path:
        print(json.dumps(obj, indent=1))
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    print("wrote", path)


# ---- local multi-process launcher (Debian's torchrun 1.13 is broken on Python 3.11)
def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(rank, world, port, fn, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    fn(args)


def launch(fn, args, nproc):
    """Run fn(args) as one rank if started by torchrun (RANK set), else spawn
    `nproc` local ranks with torch.multiprocessing (env:// rendezvous on 127.0.0.1)."""
    if "RANK" in os.environ:
        fn(args)
    else:
        import torch.multiprocessing as mp
        mp.spawn(_spawned, args=(nproc, free_port(), fn, args), nprocs=nproc)


def wait_quiet(max_busy=0.15, timeout=300, interval=2.0):
    """Block until CPU use by *other* processes is below max_busy (or timeout)."""
    t0 = time.time()
    while True:
        b = cpu_busy_fraction(interval)
        if b["busy"] <= max_busy or time.time() - t0 > timeout:
            b.update(waited_s=round(time.time() - t0, 1), quiet=b["busy"] <= max_busy)
            return b


if __name__ == "__main__":
    import sys
    cmd = sys.argv[1] if len(sys.argv) > 1 else "machine"
    if cmd == "machine":
        info = machine()
        try:
            info["torch"] = torch_info()
        except ImportError:
            pass
        print(json.dumps(info, indent=1))
    elif cmd == "wait-quiet":
        print(json.dumps(wait_quiet()))
