"""Torch's thread count follows a container's CPU quota (cgroup v1 and v2), and is never raised."""

from __future__ import annotations

import pytest
import torch
from attnbook._threads import cpu_quota, limit_threads_to_cpu_quota


@pytest.fixture
def proc(tmp_path):
    """A /proc/self/cgroup that puts the process at the root of every hierarchy."""
    path = tmp_path / "proc_self_cgroup"
    path.write_text("1:cpu,cpuacct:/\n0::/\n")
    return path


def write_v2(folder, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.max").write_text(text)


def write_v1(folder, quota, period):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.cfs_quota_us").write_text(quota)
    (folder / "cpu.cfs_period_us").write_text(period)


@pytest.mark.parametrize(("text", "expected"), [
    ("max 100000\n", None),  # no quota
    ("100000 100000\n", 1),
    ("150000 100000\n", 1),  # 1.5 CPUs: one whole thread, not two fighting for the half
    ("50000 100000\n", 1),  # less than one CPU still gets one thread
    ("400000 100000\n", 4),
    ("garbage\n", None),
    ("", None),
])
def test_cgroup_v2_quota(tmp_path, proc, text, expected):
    write_v2(tmp_path / "fs", text)
    assert cpu_quota(tmp_path / "fs", proc) == expected


@pytest.mark.parametrize(("quota", "period", "expected"), [
    ("-1", "100000", None),  # no quota
    ("200000", "100000", 2),
    ("25000", "100000", 1),
    ("200000", "0", None),
    ("x", "100000", None),
])
def test_cgroup_v1_quota(tmp_path, proc, quota, period, expected):
    write_v1(tmp_path / "fs" / "cpu", quota, period)
    assert cpu_quota(tmp_path / "fs", proc) == expected


def test_the_process_own_group_is_read_first(tmp_path):
    """Without a cgroup namespace the root holds the host's (unlimited) values and the process's
    limits sit in its own group; inside a container its own group may not be mounted, and the
    root is then the container's."""
    fs, proc = tmp_path / "fs", tmp_path / "proc_self_cgroup"
    write_v1(fs / "cpu", "-1", "100000")
    write_v1(fs / "cpu" / "docker" / "abc", "200000", "100000")
    proc.write_text("4:memory:/elsewhere\n3:cpu,cpuacct:/docker/abc\n")
    assert cpu_quota(fs, proc) == 2
    proc.write_text("3:cpu,cpuacct:/docker/not-mounted-here\n")
    assert cpu_quota(fs, proc) is None  # falls back to the root's -1
    write_v2(fs / "user.slice" / "kernel", "300000 100000")
    proc.write_text("0::/user.slice/kernel\n")
    assert cpu_quota(fs, proc) == 3  # cgroup v2 wins over v1 when both are there


def test_no_cgroup_files_means_no_quota(tmp_path, proc):
    assert cpu_quota(tmp_path, proc) is None
    assert cpu_quota(tmp_path, tmp_path / "no_such_file") is None


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_threads_lowered_to_the_quota_never_raised(tmp_path, proc, restore_threads):
    fs = tmp_path / "fs"
    write_v2(fs, "100000 100000")
    torch.set_num_threads(2)
    assert limit_threads_to_cpu_quota(fs, proc) == 1
    assert torch.get_num_threads() == 1
    write_v2(fs, "400000 100000")
    assert limit_threads_to_cpu_quota(fs, proc) == 1  # a larger quota leaves the count alone


def test_no_quota_leaves_threads_alone(tmp_path, proc, restore_threads):
    torch.set_num_threads(2)
    assert limit_threads_to_cpu_quota(tmp_path, proc) == 2
