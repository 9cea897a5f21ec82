"""Running the suite side by side (`make test`: pytest-xdist's `-n N`, whose default `--dist load` is replaced by
the scheduler below; an explicit other `--dist` keeps xdist's own).

The suite mostly waits (session timeouts, elections, JVM start-ups), so more workers than cores run it faster.
Each integration test already has its own chroot, ports and directories; what workers do share is decided here:

* Order: the longest tests first (their durations, measured, are in tests/durations.json: regenerate it with
  `--store-durations`), so that the run ends with short tests on every worker instead of one long test on one.
* Groups: the tests that use one of SHARED_FIXTURES (heavy session fixtures: a Spark JVM, a Spark cluster)
  run on one worker, one after the other, so that a run starts each fixture once instead of once per worker;
  so do the tests marked `xdist_group(NAME)` with one NAME (the lab's Spark scenarios are one such group, so
  that at most three Spark workloads run at once: the local session's, the cluster's and the lab's). A group
  is scheduled as one unit, as long as the sum of its tests; no group may be as long as the run should be
  (the longest group is the shortest the run can be). The tests of a module that uses a module-scoped fixture
  are a group too (`module PATH`), so that the fixture is made once (see uses_a_module_fixture).
* Port 9092: a lab takes 9092 on (Kafka's port) when it is free, so two labs started at once by two workers
  race for it. The run holds it (listening), and every lab takes ports the kernel picks, the lab's own
  answer to a taken 9092.
* Alone: a test marked `alone` (CPU-heavy or sensitive to a loaded machine) runs while no other test runs. The
  alone tests come last, as one group, and hold a lock for the whole run of them; every other test holds
  the lock shared while it runs (tests/side_by_side.py's RunLock).

Pytest-xdist's own `loadgroup` cannot be used: it renames node ids, which pytest 9.2 no longer lets a plugin do.
The workers tell the scheduler (which collects nothing itself) each test's group through a file."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from tests.cpu_account import CpuAccount

# fixture -> the group of every test that uses it
SHARED_FIXTURES = {"spark": "spark-local", "spark_cluster": "spark-processes"}
ALONE = "alone"
DURATIONS = Path(__file__).with_name("durations.json")
# A test not in DURATIONS yet: an integration test is assumed to take a typical integration test's time.
DEFAULT_S = {"integration": 20.0, "unit": 0.1}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("side-by-side")
    group.addoption("--store-durations", action="store_true",
                    help=f"write each test's duration (setup, call and teardown) to {DURATIONS.name}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{ALONE}: runs while no other test runs (CPU-heavy or timing-sensitive)")
    config.addinivalue_line("markers", "xdist_group(name): runs on the worker that runs the group's other tests")
    controller = not hasattr(config, "workerinput")
    if controller and config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        config.stash[SHARED_DIR] = Path(tempfile.mkdtemp(prefix="zkbroker-side-by-side-"))
        config.stash[LAB_PORT] = hold_lab_port()
        config.pluginmanager.register(RunSummary(config.stash[SHARED_DIR]), "side-by-side-summary")
    if controller and config.getoption("store_durations"):
        config.pluginmanager.register(DurationRecorder(), "side-by-side-durations")
    if not controller:
        config.stash[CPU] = CpuAccount(config.workerinput["workerid"])


def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(SHARED_DIR, None)
    if shared is not None:
        shutil.rmtree(shared, ignore_errors=True)
    held = config.stash.get(LAB_PORT, None)
    if held is not None:
        held.close()
    account = config.stash.get(CPU, None)
    if account is not None:
        account.close()


SHARED_DIR = pytest.StashKey[Path]()
LAB_PORT = pytest.StashKey["socket.socket | None"]()
CPU = pytest.StashKey[CpuAccount]()


def hold_lab_port() -> socket.socket | None:
    """A listening socket on the lab's default port (None if something else holds it: labs avoid it then too)."""
    from zkbroker.lab.cluster import DEFAULT_BASE_PORT, HOST

    held = socket.socket()
    try:
        held.bind((HOST, DEFAULT_BASE_PORT))
        held.listen(1)
    except OSError:
        held.close()
        return None
    return held


class DurationRecorder:
    """--store-durations: each test's setup, call and teardown summed, merged into DURATIONS (integration tests,
    and unit tests of a second or more; the rest take DEFAULT_S)."""

    def __init__(self) -> None:
        self.measured: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.measured[report.nodeid] = self.measured.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        known.update({nodeid: round(seconds, 1) for nodeid, seconds in self.measured.items()
                      if "/integration/" in nodeid or seconds >= 1.0})
        DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


class RunSummary:
    """(controller) After a side-by-side run, each worker's busy time, the longest groups' times, and the CPU the
    tests used (each test's own process and the processes it started -- brokers, clients, tools, JVMs --, with a
    share of what its worker's session fixtures use meanwhile; see tests/cpu_account.py), per test and per file:
    the figures to balance the next run by, and to find where the CPU goes. A run lasts at least as long as its
    longest group, and, on a machine with fewer cores than workers, at least as long as its CPU seconds over the
    cores."""

    def __init__(self, shared: Path) -> None:
        self.shared = shared
        self.busy: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.cpu_exact = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # the worker that ran it (pytest-xdist sets it)
        if node is None:
            return
        worker = node.workerinput["workerid"]
        self.busy[worker] = self.busy.get(worker, 0.0) + report.duration
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == CPU_PROPERTY:
                self.cpu[report.nodeid] = value
            elif name == CPU_EXACT_PROPERTY:
                self.cpu_exact = self.cpu_exact and value

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.busy:
            return
        plan_file = self.shared / "plan.json"
        plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
        groups: dict[str, float] = {}
        for nodeid, seconds in self.seconds.items():
            if nodeid in plan:
                groups[plan[nodeid]] = groups.get(plan[nodeid], 0.0) + seconds
        terminalreporter.write_sep("-", "side by side")
        terminalreporter.write_line("workers busy: " + ", ".join(
            f"{worker} {seconds / 60:.1f} min" for worker, seconds in sorted(self.busy.items())))
        if groups:
            terminalreporter.write_line("groups: " + ", ".join(
                f"{group} {seconds / 60:.1f} min" for group, seconds in sorted(groups.items(), key=lambda g: -g[1])))
        if self.cpu:
            cores = os.cpu_count() or 1
            total = sum(self.cpu.values())
            how = "every process of the run" if self.cpu_exact else "processes reaped by the tests only: a lower bound"
            terminalreporter.write_line(f"CPU used by the tests ({how}): {total / 60:.1f} min, {total / 60 / cores:.1f}"
                                        f" min of wall time on {cores} cores at the least; the most:")
            for nodeid, seconds in sorted(self.cpu.items(), key=lambda c: -c[1])[:10]:
                terminalreporter.write_line(f"  {seconds:7.1f} s  {nodeid}")
            files: dict[str, float] = {}
            for nodeid, seconds in self.cpu.items():
                files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0.0) + seconds
            terminalreporter.write_line("CPU per file, the most:")
            for path, seconds in sorted(files.items(), key=lambda f: -f[1])[:15]:
                terminalreporter.write_line(f"  {seconds:7.1f} s  {path}")


CPU_PROPERTY = "side_by_side_cpu_s"
CPU_EXACT_PROPERTY = "side_by_side_cpu_exact"
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds(item: pytest.Item) -> float | None:
    account = item.config.stash.get(CPU, None)
    return None if account is None else account.seconds()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item):
    started = _cpu_seconds(item)
    if started is not None:
        item.stash[_CPU_AT_SETUP] = started
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item):
    yield
    # Before the teardown's report is made, which carries the item's properties to the controller.
    started = item.stash.get(_CPU_AT_SETUP, None)
    if started is not None:
        item.user_properties.append((CPU_PROPERTY, round(_cpu_seconds(item) - started, 2)))
        item.user_properties.append((CPU_EXACT_PROPERTY, item.config.stash[CPU].exact))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """(controller) Tell each worker where the plan and the lock are."""
    node.workerinput["side_by_side_dir"] = str(node.config.stash[SHARED_DIR])


def group_of(item: pytest.Item) -> str | None:
    if item.get_closest_marker(ALONE) is not None:
        return ALONE
    marked = item.get_closest_marker("xdist_group")
    if marked is not None:
        return marked.args[0]
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in item.fixturenames:
            return group
    if uses_a_module_fixture(item):
        return f"module {item.nodeid.split('::')[0]}"
    return None


def uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture made once per module (or class, or package). Such a module's tests run
    on one worker in their file's order: scheduled one by one, longest first, they would be spread over the
    workers and interleaved with other files' tests, and pytest tears a module fixture down whenever the next
    test is another module's -- the three brokers of test_admin_api.py's `cluster` were started again for
    almost every one of its tests."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(definitions and definitions[-1].scope in ("module", "class", "package")
               for definitions in info.name2fixturedefs.values())


def expected_s(item: pytest.Item, durations: dict[str, float]) -> float:
    if item.nodeid in durations:
        return durations[item.nodeid]
    return DEFAULT_S["integration" if "/integration/" in item.nodeid else "unit"]


@pytest.hookimpl(trylast=True)  # after deselection: order what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    groups = {item.nodeid: group_of(item) for item in items}
    group_s: dict[str | None, float] = {}
    for item in items:
        if groups[item.nodeid] is not None:
            group_s[groups[item.nodeid]] = group_s.get(groups[item.nodeid], 0.0) + expected_s(item, durations)

    def key(item: pytest.Item) -> tuple[bool, float]:
        group = groups[item.nodeid]
        seconds = group_s[group] if group is not None else expected_s(item, durations)
        return (group == ALONE, -seconds)

    items.sort(key=key)  # stable: a group's tests keep their order
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "side_by_side_dir" in workerinput:
        plan = Path(workerinput["side_by_side_dir"]) / "plan.json"
        tmp = plan.with_name(f"plan.{workerinput['workerid']}.tmp")
        tmp.write_text(json.dumps({nodeid: group for nodeid, group in groups.items() if group is not None}))
        tmp.replace(plan)


# ---- the controller's scheduler --------------------------------------------------------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist") != "load":
        return None
    return make_scheduler(config, log)


def make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScheduling

    class SideBySideScheduling(LoadScheduling):
        """Each worker holds the test it runs and the next one; the next test is the first pending one it may
        run (a group belongs to the worker that took its first test, and is sent to it whole)."""

        def __init__(self, config: pytest.Config, log) -> None:
            super().__init__(config, log)
            self.group_of_index: dict[int, str] = {}
            self.owner: dict[str, object] = {}

        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is not None:
                for node in self.nodes:
                    self.check_schedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = next(iter(self.node2collection.values()))
            self.pending[:] = range(len(self.collection))
            plan = json.loads((config.stash[SHARED_DIR] / "plan.json").read_text())
            self.group_of_index = {i: plan[nodeid] for i, nodeid in enumerate(self.collection) if nodeid in plan}
            for wanted in (1, 2):  # one test each first: the longest tests start on different workers
                for node in self.nodes:
                    self._fill(node, wanted)

        def check_schedule(self, node, duration: float = 0) -> None:
            self._fill(node, 2)

        def _fill(self, node, wanted: int) -> None:
            if node.shutting_down:
                return
            while len(self.node2pending[node]) < wanted:
                index = next((i for i in self.pending if self.owner.get(self.group_of_index.get(i), node) is node),
                             None)
                if index is None:  # nothing left it may run: let it finish what it holds
                    node.shutdown()
                    return
                group = self.group_of_index.get(index)
                if group is None:
                    batch = [index]
                else:
                    self.owner[group] = node
                    batch = [i for i in self.pending if self.group_of_index.get(i) == group]
                for i in batch:
                    self.pending.remove(i)
                self.node2pending[node].extend(batch)
                node.send_runtest_some(batch)

        def remove_node(self, node):
            self.owner = {group: owner for group, owner in self.owner.items() if owner is not node}
            return super().remove_node(node)

    return SideBySideScheduling(config, log)


# ---- the workers' lock: alone tests exclusive, every other test shared ------------------------------------


class RunLock:
    """A readers-writer lock between the workers (flock on two files). A reader passes the turnstile and
    takes the run lock shared; the writer keeps the turnstile while it waits for the run lock, so that no
    new reader starts meanwhile, and holds both while it runs."""

    def __init__(self, directory: Path) -> None:
        self.turnstile = open(directory / "turnstile.lock", "a")  # held for the session
        self.run = open(directory / "run.lock", "a")
        self.exclusive = False

    def enter(self, alone: bool) -> None:
        if alone and self.exclusive:
            return
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        fcntl.flock(self.run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if alone:
            self.exclusive = True
        else:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)

    def leave(self, keep: bool) -> None:
        if keep:
            return
        fcntl.flock(self.run, fcntl.LOCK_UN)
        if self.exclusive:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
            self.exclusive = False


RUN_LOCK = pytest.StashKey[RunLock]()


# Outside pytest-timeout's timer (tryfirst: the outermost wrapper), so that waiting is not part of a test's time.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None or "side_by_side_dir" not in workerinput:
        yield
        return
    lock = item.config.stash.get(RUN_LOCK, None)
    if lock is None:
        lock = item.config.stash[RUN_LOCK] = RunLock(Path(workerinput["side_by_side_dir"]))
    alone = item.get_closest_marker(ALONE) is not None
    lock.enter(alone)
    try:
        yield
    finally:
        lock.leave(keep=alone and nextitem is not None and nextitem.get_closest_marker(ALONE) is not None)
