"""The package's imports form no cycle, counting imports inside functions (a lazy import that dodges a cycle is
still a cycle); imports under `if TYPE_CHECKING:` do not count. Registries that load a module by its name
(stages, worlds, engines, trainers) are not imports."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in (SOURCE / "sws").rglob("*.py")}


def type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imported(module: str) -> set[str]:
    """The sws modules `module` imports anywhere in its body (a package's own submodules aside)."""
    tree = ast.parse(MODULES[module].read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
            found |= {name for name in names if name in MODULES} or {base}
    return {name for name in found if name in MODULES and name != module and not module.startswith(name + ".")}


def cycles() -> list[list[str]]:
    graph = {module: imported(module) for module in MODULES}
    found, state, stack = [], {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                found.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_no_module_of_sws_imports_itself_in_a_loop() -> None:
    assert cycles() == []


def test_a_lazy_import_that_closes_a_loop_is_found(tmp_path: Path, monkeypatch) -> None:
    first, second = tmp_path / "sws" / "first.py", tmp_path / "sws" / "second.py"
    first.parent.mkdir()
    first.write_text("from sws import second\n")
    second.write_text("def late():\n    from sws.first import x\n")
    (tmp_path / "sws" / "__init__.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "SOURCE", tmp_path)
    monkeypatch.setattr(__import__(__name__), "MODULES",
                        {module_name(path): path for path in (tmp_path / "sws").rglob("*.py")})
    assert cycles() == [["sws.first", "sws.second", "sws.first"]]
