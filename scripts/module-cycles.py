#!/usr/bin/env python3
"""Finds import cycles among the modules (files) of a Rust crate.

    scripts/module-cycles.py src [python/src ...]

Each `.rs` file under a crate root is one module (`lib.rs` the root, `a.rs` and `a/mod.rs`
module `a`, `a/b.rs` module `a::b`). An edge runs from a file to the module each
`crate::`, `super::` or `self::` path in its code names: the longest prefix of the path
that is a module file (`use crate::source::Sampler` names `source/mod.rs` when `Sampler` is
only re-exported there, so a child importing through its parent's re-export and the
parent re-exporting the child is a cycle: import from the module that defines the item).
`use child::X` names the child module `child`; `mod x;` declarations are not edges; comments and string literals are ignored;
inside an inline `mod name { ... }` (a file's tests) `super::` names the file's own module. Prints every
cycle (a strongly connected component of more than one file, with one edge path around it)
and exits 1 if there is any, 0 otherwise.
"""

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")


def strip(code: str) -> str:
    """The code without comments, string literals and char literals (kept as spaces)."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if code.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif code.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', code[i:]) and (i == 0 or not code[i - 1].isalnum()):
            m = re.match(r'r(#*)"', code[i:])
            end = '"' + m.group(1)
            j = code.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append(" ")
        elif c == '"':
            i += 1
            while i < n and code[i] != '"':
                i += 2 if code[i] == "\\" else 1
            i += 1
            out.append(" ")
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", code[i:]):
            i += len(re.match(r"'(\\.[^']*|[^\\'])'", code[i:]).group(0))
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_paths(code: str):
    """Every full path a `use` tree names (`use a::{b, c::d}` gives a::b and a::c::d)."""
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        yield from expand(m.group(1).replace(" ", "").replace("\n", ""))


def expand(tree: str):
    depth, split = 0, None
    for i, c in enumerate(tree):
        if c == "{" and depth == 0:
            split = i
            break
    if split is None:
        yield re.sub(r"as\w+$", "", tree)
        return
    prefix, inner = tree[:split], tree[split + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += c == "{"
        depth -= c == "}"
        if c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    for p in filter(None, parts):
        yield from expand(prefix + p)


def modules(root: Path):
    """{module path tuple: file} for the crate whose root file is root/lib.rs."""
    mods = {}
    for f in sorted(root.rglob("*.rs")):
        rel = f.relative_to(root).with_suffix("").parts
        if rel == ("lib",) or rel == ("main",):
            mods[()] = f
        elif rel[-1] == "mod":
            mods[rel[:-1]] = f
        else:
            mods[rel] = f
    return mods


def inline_mods_lifted(code: str) -> str:
    """The code with each inline `mod name { ... }` block's paths read from the file's
    module: inside the block `super::` names the file's own module (`self::`), and
    `super::super::` its parent (`super::`)."""
    out, i = [], 0
    for m in re.finditer(r"\bmod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{", code):
        if m.start() < i:
            continue  # nested in a block already lifted
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += (code[j] == "{") - (code[j] == "}")
            j += 1
        block = re.sub(
            r"\bsuper\s*::(\s*super\s*::)?",
            lambda s: "super::" if s.group(1) else "self::",
            code[m.end() : j],
        )
        out.append(code[i : m.end()] + block)
        i = j
    out.append(code[i:])
    return "".join(out)


def edges(root: Path):
    mods = modules(root)
    path_of = {f: p for p, f in mods.items()}
    graph = {f: set() for f in mods.values()}
    for f, here in path_of.items():
        code = inline_mods_lifted(strip(f.read_text()))
        texts = list(use_paths(code)) + [m.group(0) for m in PATH.finditer(code)]
        for text in texts:
            segs = [s.strip() for s in text.replace(" ", "").split("::") if s.strip()]
            if segs and tuple(list(here) + [segs[0]]) in mods:
                segs = ["self"] + segs  # `use child::X` (2018 paths) names a child module
            if not segs or segs[0] not in ("crate", "super", "self"):
                continue
            base = list(here)
            i = 0
            if segs[0] == "crate":
                base, i = [], 1
            while i < len(segs) and segs[i] in ("super", "self"):
                if segs[i] == "super":
                    base = base[:-1]
                i += 1
            target = tuple(base)
            for s in segs[i:]:
                if tuple(list(target) + [s]) in mods:
                    target = tuple(list(target) + [s])
                else:
                    break
            if target in mods and mods[target] != f:
                graph[f].add(mods[target])
    return graph


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def loop_in(comp, graph):
    """One cycle through the component's first file, as a list of files."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def main(roots):
    found = 0
    for r in roots:
        root = Path(r)
        graph = edges(root)
        comps = cycles(graph)
        n_edges = sum(len(v) for v in graph.values())
        print(f"{root}: {len(graph)} modules, {n_edges} edges, {len(comps)} cycle(s)")
        for comp in comps:
            found += 1
            names = [str(f.relative_to(root)) for f in loop_in(comp, graph)]
            print(f"  cycle of {len(comp)} files: " + " -> ".join(names))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["src"]))
