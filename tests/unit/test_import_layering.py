"""The project's own imports, read with `ast` (every import statement, TYPE_CHECKING ones and those inside
functions included): no import cycle among the modules of controller/ or of zkbroker/server/, and the
packages used only in the documented direction:

    zkbroker.server, zkbroker.cli, zkbroker.tools, zkbroker.lab (and zkbroker.__main__)
        may use controller and consumer;
    controller and consumer use zkbroker's foundation only (protocol, log, zk, client, config, and the other
        zkbroker modules outside the four above), not each other;
    the foundation uses none of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controller", "consumer", "zkbroker")
APPLICATIONS = ("zkbroker.server", "zkbroker.cli", "zkbroker.tools", "zkbroker.lab", "zkbroker.__main__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an imported name lives in (None: not ours)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        found |= {m for m in map(_resolve, names) if m is not None and m != module}
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _cycles(prefix: str) -> list[list[str]]:
    """The import cycles (strongly connected components of more than one module) among modules under prefix."""
    nodes = [m for m in GRAPH if m == prefix or m.startswith(prefix + ".")]
    edges = {m: [n for n in GRAPH[m] if n in nodes] for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in edges[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                component.append(n)
                if n == m:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for m in nodes:
        if m not in index:
            visit(m)
    return sorted(out)


def _layer(module: str) -> str:
    if any(module == a or module.startswith(a + ".") for a in APPLICATIONS):
        return "application"
    top = module.split(".")[0]
    return top if top in ("controller", "consumer") else "foundation"


#: Which layers each layer may import.
ALLOWED = {
    "application": {"application", "controller", "consumer", "foundation"},
    "controller": {"controller", "foundation"},
    "consumer": {"consumer", "foundation"},
    "foundation": {"foundation"},
}


def test_the_walk_finds_the_projects_modules_and_their_imports():
    assert {"controller.controller", "zkbroker.server.kafka_server", "consumer.connector"} <= set(MODULES)
    assert "controller.controller" in GRAPH["zkbroker.server.kafka_server"]
    assert "zkbroker.zk.paths" in GRAPH["controller.controller"]


def test_no_import_cycle_among_the_modules_of_controller():
    assert _cycles("controller") == []


def test_no_module_of_controller_imports_the_controller_back():
    assert [m for m in GRAPH if m.startswith("controller.") and "controller.controller" in GRAPH[m]] == []


def test_no_import_cycle_among_the_modules_of_server():
    assert _cycles("zkbroker.server") == []


def test_packages_import_only_in_the_documented_direction():
    wrong = sorted(f"{m} -> {n}" for m in GRAPH for n in GRAPH[m] if _layer(n) not in ALLOWED[_layer(m)])
    assert wrong == []


def test_the_broker_never_imports_the_lab_which_sits_above_it():
    """The lab drives brokers; a broker serves the lab's control interface through its protocol, which lives below
    both (zkbroker/control_protocol.py)."""
    product = [m for m in GRAPH if _layer(m) != "application" or m.startswith("zkbroker.server")]
    assert not {m: sorted(n for n in GRAPH[m] if n.startswith("zkbroker.lab")) for m in product
                if any(n.startswith("zkbroker.lab") for n in GRAPH[m])}
