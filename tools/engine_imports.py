"""Point `app/` and `ui/` at the engines' facade: rewrite imports of `engines.<sub>` into imports of `engines`.

A developer tool, not part of the app. `app` and `ui` may import `engines` and nothing under it (the import-linter
contract "app and ui use the engines' facade only" fails otherwise); run this after code that reaches into a
sub-module lands, from the repository root:

    .venv/bin/python tools/engine_imports.py            # rewrite app/ and ui/, then sort the touched imports
    .venv/bin/python tools/engine_imports.py --check    # only say what it would change (exit 1 if anything)

What it rewrites, at module level and inside functions alike:
- `from engines.x.y import A, B as C` (parenthesised over several lines too) -> `from engines import A, B as C`.
  A name the facade offers under a clearer name (`engines._RENAMED`, e.g. `engines.models.catalog.find_entry` is
  `engines.find_catalog_entry`) is renamed at its uses in that scope, or imported `as` the old name where the new
  one would clash with another name in the file.
- `from engines.x import module` (or `from engines import module`) used as `module.A` -> `from engines import A`
  and `A` at each use; `import engines.x.y` used as `engines.x.y.A` -> `import engines` and `engines.A`.
- A name the facade does not offer is left as it is and listed at the end: add it to `engines/__init__.py`
  (`_OFFER`, the `TYPE_CHECKING` imports and `__all__`) and run this again. Running it twice changes nothing.

A name is "offered" when `engines.<name>` is the very object the sub-module holds, so the facade resolves lazily
to the same function or class: a test that patches the sub-module's name must patch `engines.<name>` instead once
the caller imports it from the facade.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("app", "ui")
LINE = 120
IMPORT_ENGINES = "import engines"


@dataclass
class Edit:
    start: int  # byte offsets into the file's UTF-8 text
    end: int
    text: str


@dataclass
class FileResult:
    path: Path
    edits: list[Edit] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # "engines.x.y.A (file:line)"


class Facade:
    """What `engines` offers, and under which name a sub-module's object is offered there."""

    def __init__(self) -> None:
        sys.path.insert(0, str(REPO))
        self.engines = importlib.import_module("engines")
        self.names: set[str] = set(self.engines.__all__)
        self.renamed: dict[tuple[str, str], str] = {
            source: name for name, source in getattr(self.engines, "_RENAMED", {}).items()
        }

    def is_module(self, dotted: str) -> bool:
        try:
            return importlib.util.find_spec(dotted) is not None
        except (ImportError, ValueError):
            return False

    def _module(self, dotted: str) -> ModuleType | None:
        try:
            return importlib.import_module(dotted)
        except ImportError:
            return None

    def offered_as(self, module: str, attr: str) -> str | None:
        """The facade's name for `module.attr`, or None when the facade does not offer that object."""
        if module == "engines":
            return attr if attr in self.names else None
        source = self._module(module)
        if source is None or not hasattr(source, attr):
            return None
        value = getattr(source, attr)
        if attr in self.names and getattr(self.engines, attr) is value:
            return attr
        if (module, attr) in self.renamed:
            return self.renamed[(module, attr)]
        for name, (other_module, other_attr) in getattr(self.engines, "_RENAMED", {}).items():
            other = self._module(other_module)
            if other is not None and getattr(other, other_attr, None) is value:
                return str(name)
        if callable(value):  # a function or class re-exported by another sub-module under the same object
            for name in sorted(self.names):
                if getattr(self.engines, name) is value:
                    return name
        return None


def shown(path: Path) -> str:
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def line_starts(data: bytes) -> list[int]:
    starts = [0]
    for i, byte in enumerate(data):
        if byte == 0x0A:
            starts.append(i + 1)
    return starts


def offsets(node: ast.AST, starts: list[int]) -> tuple[int, int]:
    """Byte offsets of a node (ast columns are UTF-8 byte offsets)."""
    begin = starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
    end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
    return begin, end


def import_text(names: list[str], indent: int) -> str:
    """`from engines import a, b as c`, parenthesised one per line when it would be too long."""
    one = f"from engines import {', '.join(names)}"
    if indent + len(one) <= LINE:
        return one
    pad = " " * (indent + 4)
    return "from engines import (\n" + "".join(f"{pad}{n},\n" for n in names) + " " * indent + ")"


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    up: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            up[child] = node
    return up


def scope_of(node: ast.AST, up: dict[ast.AST, ast.AST], tree: ast.Module) -> ast.AST:
    while node in up:
        node = up[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return tree


def bindings(tree: ast.AST) -> dict[str, int]:
    """How often each name is bound under `tree`: defined, assigned, an argument, or imported from outside engines."""
    seen: dict[str, int] = {}

    def add(name: str) -> None:
        seen[name] = seen.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            add(node.name)
        elif isinstance(node, ast.arg):
            add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                add(name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] != "engines":
            for alias in node.names:  # another module's name of the same spelling
                add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:  # `import engines[.x]` binds the facade itself: not a clash
                if alias.asname or alias.name.split(".")[0] != "engines":
                    add(alias.asname or alias.name.split(".")[0])
    return seen


def names_in(node: ast.AST, name: str) -> Iterator[ast.Name]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load):
            yield sub


def dotted(node: ast.AST) -> str | None:
    """`engines.x.y` for an attribute chain of plain names, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def rewrite(path: Path, facade: Facade) -> FileResult:
    data = path.read_bytes()
    tree = ast.parse(data, filename=str(path))
    starts = line_starts(data)
    up = parents(tree)
    result = FileResult(path)
    where = shown(path)
    plain_imports: list[ast.Import] = []  # `import engines.x.y`, rewritten once its uses are known
    renamed_here: dict[tuple[ast.AST, str], str] = {}  # (scope, old name) -> the facade's, renamed at its uses

    def free(name: str, old: str, scope: ast.AST) -> bool:
        """True when `name` can replace `old` in `scope`: nothing there is called `name`, `old` is bound only here."""
        bound = bindings(scope)
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            bound[scope.name] = bound.get(scope.name, 1) - 1  # the function's own name is bound outside it
        used = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name)}
        taken = name in used or bound.get(name, 0) > 0 or renamed_here.get((scope, old), name) != name
        return not taken and bound.get(old, 0) <= 0

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "engines":
            module = str(node.module)
            scope = scope_of(node, up, tree)
            to_facade: list[str] = []
            kept: list[str] = []
            for alias in node.names:
                local = alias.asname or alias.name
                spec = f"{alias.name} as {alias.asname}" if alias.asname else alias.name
                sub = f"{module}.{alias.name}"
                if facade.is_module(sub) and not (module == "engines" and alias.name in facade.names):
                    names = module_uses(tree, scope, local, facade, sub, where, result, starts)
                    if names is None:
                        kept.append(spec)
                    else:
                        to_facade.extend(names)
                    continue
                if module == "engines":
                    if alias.name not in facade.names:
                        result.missing.append(f"engines.{alias.name} ({where}:{node.lineno})")
                    to_facade.append(spec)
                    continue
                offered = facade.offered_as(module, alias.name)
                if offered is None:
                    result.missing.append(f"{module}.{alias.name} ({where}:{node.lineno})")
                    kept.append(spec)
                elif offered == local or alias.asname:
                    to_facade.append(local if offered == local else f"{offered} as {local}")
                elif free(offered, local, scope):
                    renamed_here[(scope, local)] = offered
                    to_facade.append(offered)
                    for use in names_in(scope, local):
                        begin, end = offsets(use, starts)
                        result.edits.append(Edit(begin, end, offered))
                else:
                    to_facade.append(f"{offered} as {local}")
            if module == "engines" and not any(facade.is_module(f"engines.{a.name}") for a in node.names):
                continue  # already the facade (a name it lacks is listed as missing)
            indent = node.col_offset
            lines = []
            if IMPORT_ENGINES in to_facade:
                lines.append(IMPORT_ENGINES)
                to_facade = [name for name in to_facade if name != IMPORT_ENGINES]
            if to_facade:
                lines.append(import_text(list(dict.fromkeys(to_facade)), indent))
            if kept:
                lines.append(f"from {module} import {', '.join(kept)}")
            begin, end = offsets(node, starts)
            text = ("\n" + " " * indent).join(lines) if lines else "pass"
            result.edits.append(Edit(begin, end, text))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("engines.") and alias.asname is None:
                    if len(node.names) > 1:
                        result.missing.append(f"import {alias.name} among others: split it ({where}:{node.lineno})")
                    else:
                        plain_imports.append(node)
                elif alias.name.startswith("engines.") and alias.asname:
                    if len(node.names) > 1:
                        result.missing.append(f"import {alias.name} among others: split it ({where}:{node.lineno})")
                        continue
                    scope = scope_of(node, up, tree)
                    names = module_uses(tree, scope, alias.asname, facade, alias.name, where, result, starts)
                    if names is not None:
                        begin, end = offsets(node, starts)
                        text = IMPORT_ENGINES if names == [IMPORT_ENGINES] else import_text(names, node.col_offset)
                        result.edits.append(Edit(begin, end, text))
    # `engines.x.y.A` through `import engines`: -> `engines.A`; a chain left as it is keeps its `import engines.x.y`
    unresolved: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = dotted(node)
        if not chain or not chain.startswith("engines.") or not facade.is_module(chain):
            continue
        outer = up.get(node)
        if not isinstance(outer, ast.Attribute):  # the module object itself: `engines.x.y` passed around
            result.missing.append(f"{chain} ({where}:{node.lineno}): used as a module object")
            unresolved.append(chain)
        elif not facade.is_module(f"{chain}.{outer.attr}"):
            offered = facade.offered_as(chain, outer.attr)
            if offered is None:
                result.missing.append(f"{chain}.{outer.attr} ({where}:{node.lineno})")
                unresolved.append(chain)
            else:
                begin, end = offsets(outer, starts)
                result.edits.append(Edit(begin, end, f"engines.{offered}"))
    for node in plain_imports:
        name = node.names[0].name
        if not any(chain == name or chain.startswith(name + ".") for chain in unresolved):
            begin, end = offsets(node, starts)
            result.edits.append(Edit(begin, end, IMPORT_ENGINES))
    result.edits = [e for e in result.edits if data[e.start : e.end] != e.text.encode("utf-8")]  # idempotent
    return result


def module_uses(
    tree: ast.AST,
    scope: ast.AST,
    local: str,
    facade: Facade,
    module: str,
    where: str,
    result: FileResult,
    starts: list[int],
) -> list[str] | None:
    """Rewrite `local.A` uses of an imported engine module to `A` (to `engines.A` where a bare `A` would clash);
    what to import from the facade instead (`IMPORT_ENGINES` for `import engines`), or None (kept as it is)."""
    uses = [n for n in ast.walk(scope) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
    uses = [n for n in uses if n.value.id == local]  # type: ignore[attr-defined]
    plain = sum(1 for _ in names_in(scope, local)) - len(uses)
    offered = {n.attr: facade.offered_as(module, n.attr) for n in uses}
    missing = sorted(attr for attr, name in offered.items() if name is None)
    bound = bindings(tree)
    clash = any(name is not None and bound.get(name, 0) > 0 for name in offered.values())
    qualified = clash and bound.get("engines", 0) == 0  # `engines.A` where a bare `A` means something else here
    if clash and not qualified:
        result.missing.append(f"{module} ({where}): its names clash with the file's, and so does `engines`")
        return None
    if plain or missing:
        line = getattr(scope, "lineno", 1)
        why = f"used as a module object, not only as {local}.NAME" if plain else f"{', '.join(missing)} not offered"
        for attr in missing:
            result.missing.append(f"{module}.{attr} ({where}:{line})")
        if plain:
            result.missing.append(f"{module} ({where}:{line}): {why}")
        return None
    for use in uses:
        begin, end = offsets(use, starts)
        result.edits.append(Edit(begin, end, f"engines.{offered[use.attr]}" if qualified else str(offered[use.attr])))
    return [IMPORT_ENGINES] if qualified else sorted({str(name) for name in offered.values()})


def apply(result: FileResult) -> bool:
    if not result.edits:
        return False
    data = result.path.read_bytes()
    for edit in sorted(result.edits, key=lambda e: e.start, reverse=True):
        data = data[: edit.start] + edit.text.encode("utf-8") + data[edit.end :]
    result.path.write_bytes(data)
    return True


def python_files(paths: list[str]) -> Iterator[Path]:
    for name in paths:
        path = (REPO / name).resolve()
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=list(ROOTS), help="folders or files (default: app ui)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when something would change")
    args = parser.parse_args(argv)
    facade = Facade()
    changed: list[Path] = []
    missing: list[str] = []
    for path in python_files(args.paths):
        result = rewrite(path, facade)
        missing.extend(result.missing)
        if result.edits and (args.check or apply(result)):
            changed.append(path)
    for path in changed:
        print(f"{'would rewrite' if args.check else 'rewrote'} {shown(path)}")
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if changed and not args.check and ruff:  # merge, sort and wrap the rewritten imports
        subprocess.run([ruff, "check", "--quiet", "--fix", "--select", "I,F401", *map(str, changed)], cwd=REPO)
    if missing:
        print("\nNot offered by engines (add to engines/__init__.py, then run this again):")
        for line in dict.fromkeys(missing):
            print(f"  {line}")
    return 1 if missing or (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
