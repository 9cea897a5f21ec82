"""The CPU a pytest worker and every process it starts use, as the side-by-side summary reports per test.

getrusage counts only the children a process has reaped: a broker still running at a test's end, a daemonized
JVM or a process in a lab's network namespace escapes it. As root, a worker moves itself into a cgroup of its
own (v2 or v1's cpuacct), which every descendant inherits and cannot leave, and reads the group's usage; without
the rights to, it falls back to getrusage (a lower bound)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuAccount:
    def __init__(self, name: str) -> None:
        self.group: Path | None = None
        self.exact = False
        for root, usage in ((CGROUP_V2, "cpu.stat"), (CGROUP_V1_CPUACCT, "cpuacct.usage")):
            if not (root / usage).exists() and not (root / "cgroup.procs").exists():
                continue
            group = root / f"zkbroker-tests-{name}-{os.getpid()}"
            try:
                group.mkdir(exist_ok=True)
                (group / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                continue  # not root, or a cgroup tree this process may not change: getrusage instead
            self.group, self._usage, self.exact = group, group / usage, True
            break

    def seconds(self) -> float:
        if self.group is None:
            own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
        text = self._usage.read_text()
        if self._usage.name == "cpu.stat":  # v2: "usage_usec N" among others
            return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
        return int(text) / 1e9  # v1: nanoseconds

    def close(self) -> None:
        """Back to the parent group; the group itself goes once the last process in it has ended."""
        if self.group is None:
            return
        try:
            (self.group.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.group.rmdir()
        except OSError:
            pass  # a process of the run is still in it (it is ended by its own fixture or by the machine)
