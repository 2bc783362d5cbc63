"""The package graph, checked from the import statements (parsed with ``ast``; nothing runs).

Layers, low to high: ``compctl_base`` (errors, units, atomic files) < ``traces`` < ``sim`` <
``realrun`` < ``analysis``. The rules (docs/architecture.md draws the graph):

1. A module imports no higher layer (``traces`` imports no ``sim``; ``sim`` imports no
   ``realrun`` or ``analysis``), whether at the top, inside a function or for type checking.
2. CLI modules (those defining ``register(subparsers)``, which ``sim.entry.COMMANDS`` lists, and
   ``sim.entry`` itself) are front ends: no library module imports one, and no module imports
   another top's CLI module. Only the entry point reaches every top, by name, which no import
   statement shows. (Option sets shared by several commands, such as ``sim.sync.cli_args``, are
   library modules: they register no command.)
3. The pure cores (``sim.control``, ``sim.compress``, ``sim.collectives``, ``sim.convergence``)
   import no SimPy, pandas, ``argparse`` or CLI module.
4. No import cycles between modules.

Every failure names the offending edge as ``file:line: importer -> imported``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Top-level packages, low to high.
LAYERS = ("compctl_base", "traces", "sim", "realrun", "analysis")
#: Packages whose modules (CLI modules aside) stay free of the engine, tables and front ends.
PURE = ("sim.control", "sim.compress", "sim.collectives", "sim.convergence")
#: What the pure cores may not import (besides CLI modules).
PURE_BANNED = ("simpy", "pandas", "argparse")


@dataclass(frozen=True)
class Edge:
    """One import statement: ``src`` imports ``dst`` at ``path:line``."""

    src: str
    dst: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.src} -> {self.dst}"


def find_modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the layered packages under ``root``: name -> (file, is a package)."""
    mods: dict[str, tuple[Path, bool]] = {}
    for top in LAYERS:
        for f in sorted((root / top).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            mods[".".join(parts)] = (f, is_pkg)
    return mods


def import_edges(root: Path) -> tuple[dict[str, tuple[Path, bool]], list[Edge], set[str]]:
    """Modules under ``root``, every import statement among them (and to third parties), and
    the CLI modules."""
    mods = find_modules(root)
    edges: list[Edge] = []
    clis: set[str] = {"sim.entry"}
    for name, (path, is_pkg) in mods.items():
        package = name.split(".") if is_pkg else name.split(".")[:-1]
        rel = str(path.relative_to(root))
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body):
            clis.add(name)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # ``from pkg import sub`` imports the module pkg.sub when there is one.
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [module, *subs]
            for t in targets:
                edges.append(Edge(name, _resolve(t, mods), rel, node.lineno))
    return mods, edges, clis


def _resolve(target: str, mods: dict[str, tuple[Path, bool]]) -> str:
    """The longest known module prefix of ``target`` (``target`` itself for third parties)."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in mods:
            return cand
    return target


def top(module: str) -> str:
    """The top-level package of a dotted name."""
    return module.split(".")[0]


def upward_edges(edges: list[Edge]) -> list[str]:
    """Rule 1: imports of a higher layer."""
    bad = []
    for e in edges:
        s, d = top(e.src), top(e.dst)
        if d in LAYERS and s in LAYERS and LAYERS.index(d) > LAYERS.index(s):
            allowed = ", ".join(LAYERS[: LAYERS.index(s)]) or "no other top"
            bad.append(f"{e} ({s} may import only {allowed})")
    return bad


def cli_edges(edges: list[Edge], clis: set[str]) -> list[str]:
    """Rule 2: imports of a CLI module from a library module or from another top."""
    bad = []
    for e in edges:
        if e.dst not in clis or e.src == e.dst:
            continue
        if e.src not in clis:
            bad.append(f"{e} (a library module imports a CLI module)")
        elif top(e.src) != top(e.dst):
            bad.append(f"{e} (a CLI module imports another top's CLI module)")
    return bad


def impure_edges(edges: list[Edge], clis: set[str]) -> list[str]:
    """Rule 3: SimPy, pandas, argparse or CLI modules imported by a pure core."""
    bad = []
    for e in edges:
        pure = any(e.src == p or e.src.startswith(p + ".") for p in PURE)
        if not pure or e.src in clis:
            continue
        if top(e.dst) in PURE_BANNED or e.dst in clis:
            bad.append(f"{e} (pure core imports {e.dst})")
    return bad


def cycles(edges: list[Edge], mods: dict[str, tuple[Path, bool]]) -> list[str]:
    """Rule 4: one line per import cycle (strongly connected set of modules), with its edges."""
    graph: dict[str, dict[str, Edge]] = {m: {} for m in mods}
    for e in edges:
        if e.dst in mods and e.dst != e.src:
            graph[e.src].setdefault(e.dst, e)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's algorithm (the graph is a few hundred nodes)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    out = []
    for comp in comps:
        inside = set(comp)
        links = [str(graph[a][b]) for a in comp for b in sorted(graph[a]) if b in inside]
        out.append("cycle " + " <-> ".join(comp) + ":\n    " + "\n    ".join(links))
    return out


def _check(root: Path) -> dict[str, list[str]]:
    mods, edges, clis = import_edges(root)
    return {
        "upward": sorted(upward_edges(edges)),
        "cli": sorted(cli_edges(edges, clis)),
        "impure": sorted(impure_edges(edges, clis)),
        "cycles": cycles(edges, mods),
    }


_REPO = _check(ROOT)


def test_no_module_imports_a_higher_layer() -> None:
    assert not _REPO["upward"], "\n".join(_REPO["upward"])


def test_cli_modules_are_front_ends_only() -> None:
    assert not _REPO["cli"], "\n".join(_REPO["cli"])


def test_pure_cores_import_no_engine_tables_or_cli() -> None:
    assert not _REPO["impure"], "\n".join(_REPO["impure"])


def test_no_import_cycles() -> None:
    assert not _REPO["cycles"], "\n".join(_REPO["cycles"])


def test_every_layer_is_found() -> None:
    mods = find_modules(ROOT)
    assert {top(m) for m in mods} == set(LAYERS)
    assert len(mods) > 100  # the checks above see the real tree, not an empty folder


def test_cli_modules_are_the_entry_points_commands() -> None:
    """The modules rule 2 treats as front ends are exactly those ``sim.entry`` dispatches to."""
    tree = ast.parse((ROOT / "sim" / "entry.py").read_text(encoding="utf-8"))
    table = next(
        n.value for n in tree.body
        if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "COMMANDS"
    )
    listed = {module for _, module, _ in ast.literal_eval(table)}
    _, _, clis = import_edges(ROOT)
    assert clis - {"sim.entry"} == listed


def _tree(root: Path, files: dict[str, str]) -> Path:
    for top_name in LAYERS:
        (root / top_name).mkdir(parents=True, exist_ok=True)
        (root / top_name / "__init__.py").write_text("")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(text)
    return root


def test_each_rule_catches_a_bad_tree(tmp_path: Path) -> None:
    """The checks fail on a tree that breaks each rule once, naming the offending edge."""
    found = _check(_tree(tmp_path, {
        "traces/model.py": "def f():\n    from sim.errors import InputError\n",
        "sim/errors.py": "",
        "sim/cli_sim.py": "import argparse\n\ndef register(sub):\n    pass\n",
        "sim/runner.py": "from . import engine\n",
        "sim/engine.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                         "    from .runner import SimConfig\n",
        "sim/control/types.py": "import pandas as pd\nfrom ..cli_sim import parse\n",
        "realrun/cli.py": "from sim.cli_sim import parse_param\n\ndef register(sub):\n    pass\n",
    }))
    assert found["upward"] == [
        "traces/model.py:2: traces.model -> sim.errors (traces may import only compctl_base)"]
    assert found["cli"] == [
        "realrun/cli.py:1: realrun.cli -> sim.cli_sim (a CLI module imports another top's CLI "
        "module)",
        "sim/control/types.py:2: sim.control.types -> sim.cli_sim (a library module imports a "
        "CLI module)",
    ]
    assert found["impure"] == [
        "sim/control/types.py:1: sim.control.types -> pandas (pure core imports pandas)",
        "sim/control/types.py:2: sim.control.types -> sim.cli_sim (pure core imports "
        "sim.cli_sim)",
    ]
    assert found["cycles"] == [
        "cycle sim.engine <-> sim.runner:\n"
        "    sim/engine.py:3: sim.engine -> sim.runner\n"
        "    sim/runner.py:1: sim.runner -> sim.engine"
    ]


#: Longest module, in lines, that needs no reason.
MAX_LINES = 400


def test_long_modules_say_why() -> None:
    """Modules over ~400 lines say why in their docstring (a paragraph starting "Size")."""
    unexplained = []
    for path, _ in sorted(find_modules(ROOT).values()):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "\nSize (over 400 lines):" not in "\n" + doc:
            unexplained.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not unexplained, "split these modules or say why in their docstring:\n" + "\n".join(
        unexplained
    )


def private_reaches(paths: list[Path]) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``/``cls``: a module reaching into another
    object's private state (dunders aside)."""
    bad = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{_rel(path)}:{node.lineno}: .{node.attr}")
    return bad


def test_hook_parts_use_public_interfaces_only() -> None:
    """realrun/hook/ is small parts with public interfaces: none reaches into another's state."""
    bad = private_reaches(sorted((ROOT / "realrun" / "hook").rglob("*.py")))
    assert not bad, "\n".join(bad)


def test_private_reach_check_bites(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("def f(state):\n    return state._cur, self_ok()\n")
    (tmp_path / "ok.py").write_text("class A:\n    def g(self):\n        return self._x\n")
    found = [s.split(": ", 1)[1] for s in private_reaches([src, tmp_path / "ok.py"])]
    assert found == ["._cur"]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
