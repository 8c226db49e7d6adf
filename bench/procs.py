"""Process-tree memory and the machine's description (psutil when installed, else /proc)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _rss_and_kind(pid: int) -> tuple[int, str]:
    try:
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError, ValueError):
        return 0, "gone"
    exe = os.path.basename(cmd[0].decode(errors="replace")) if cmd and cmd[0] else ""
    text = b" ".join(cmd).decode(errors="replace")
    if exe == "java":
        return rss, "jvm"
    if "pyspark.daemon" in text or "pyspark.worker" in text or "pyspark/daemon" in text:
        return rss, "python_workers"
    if exe.startswith("python"):
        return rss, "python"
    return rss, "other"


def tree_rss(root: int) -> dict[str, int]:
    """RSS in bytes of ``root`` and its descendants, summed by kind: jvm, python_workers, python, other
    (``root`` itself counts as ``driver`` when it is Python), plus ``total``."""
    children = _children_map()
    out: dict[str, int] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        rss, kind = _rss_and_kind(pid)
        if pid == root and kind == "python":
            kind = "driver"
        out[kind] = out.get(kind, 0) + rss
        stack.extend(children.get(pid, []))
    out["total"] = sum(v for k, v in out.items() if k != "gone")
    return out


def machine() -> dict:
    info: dict = {"hostname": platform.node(), "platform": platform.platform(), "cpus": os.cpu_count(),
                  "python": platform.python_version(), "load_avg_at_start": os.getloadavg()}
    try:
        import psutil

        info["memory_total_bytes"] = psutil.virtual_memory().total
        info["memory_available_bytes"] = psutil.virtual_memory().available
        info["psutil"] = psutil.__version__
    except ImportError:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        info["memory_total_bytes"] = int(meminfo["MemTotal"].split()[0]) * 1024
        info["memory_available_bytes"] = int(meminfo["MemAvailable"].split()[0]) * 1024
    try:
        cpu = [line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
        info["cpu_model"] = cpu[0].split(":", 1)[1].strip() if cpu else None
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("pyspark", "kafka-python", "faust-streaming", "pandas", "pyarrow", "numpy"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    from common.settings import get_settings

    info["kafka_broker"] = get_settings().kafka_version
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    info["java"] = (java.stderr or java.stdout).splitlines()[0] if (java.stderr or java.stdout) else None
    info["python_executable"] = sys.executable
    return info
