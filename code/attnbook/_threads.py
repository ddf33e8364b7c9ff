"""Size torch's thread pool to the CPU time a container may use.

torch starts one thread per core it can see. In a container with a CPU quota (Binder, a
Kubernetes pod, ``docker run --cpus``) it still sees every core of the host, so a notebook
given one CPU's worth of time on a 64-core host runs 64 threads, which the kernel then throttles
in turn. The lessons' token loops are chains of small operations that wait on every thread, and
they slow down many times over. ``limit_threads_to_cpu_quota`` lowers the thread count to the
quota when there is one below it; anywhere else it changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import torch

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _own_groups(
    root: Path, proc_cgroup: Path
) -> tuple[list[Path], list[Path]]:
    """Folders that may hold this process's CPU limits: its own cgroup (from /proc/self/cgroup)
    first, then the root of the mount, which is the container's own group when the container
    has a cgroup namespace or its group mounted at the root. Returns (v2 folders, v1 folders)."""
    v2, v1 = [root], [root / "cpu"]
    for line in (_read(proc_cgroup) or "").splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if path.strip("/"):
            if controllers == "":
                v2.insert(0, root / path.strip("/"))
            elif "cpu" in controllers.split(","):
                v1.insert(0, root / "cpu" / path.strip("/"))
    return v2, v1


def cpu_quota(
    root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
) -> int | None:
    """Whole CPUs of time this process's cgroup may use per period, rounded down (at least 1),
    or None when there is no quota or it cannot be read.

    cgroup v2 keeps ``quota period`` in ``cpu.max`` (``max`` for none); v1 keeps them in
    ``cpu/cpu.cfs_quota_us`` (−1 for none) and ``cpu/cpu.cfs_period_us``.
    """
    v2_dirs, v1_dirs = _own_groups(root, proc_cgroup)
    quota, period = "", ""
    v2 = next(
        (text for d in v2_dirs if (text := _read(d / "cpu.max")) is not None),
        None,
    )
    if v2 is not None:
        quota, period = (v2.split() + ["", ""])[:2]
    else:
        v1 = next(
            (d for d in v1_dirs if (d / "cpu.cfs_quota_us").exists()), None
        )
        if v1 is not None:
            quota = _read(v1 / "cpu.cfs_quota_us") or ""
            period = _read(v1 / "cpu.cfs_period_us") or ""
    try:
        quota_us, period_us = int(quota), int(period)
    except (
        ValueError
    ):  # "max", a missing file, or anything unexpected: no quota we can use
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, quota_us // period_us)


def limit_threads_to_cpu_quota(
    root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
) -> int:
    """Lower ``torch.set_num_threads`` to :func:`cpu_quota` if that is smaller than the current
    count (never raise it). Returns the thread count in force afterwards."""
    quota = cpu_quota(root, proc_cgroup)
    if quota is not None and quota < torch.get_num_threads():
        torch.set_num_threads(quota)
    return torch.get_num_threads()
