"""Every global name a function of the given Python modules uses is defined: the module's own,
an import, a name a star import of a module beside it brings, or a builtin; and NAME.attr,
where NAME is a module beside it, is defined there. The GPU check's rows that need a GPU
never run here: a name a split left behind would show only in the GPU machine's scarce
time (tests/e2e/79_gpu_bundle.sh).

usage: py_names.py FILE.py...    prints each name defined nowhere; exit 1 if any"""
import ast
import builtins
import os
import symtable
import sys


def defined(path):
    """The names PATH's module defines at its top, with those its star imports bring."""
    src = open(path).read()
    top = symtable.symtable(src, path, "exec")
    names = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    for line in src.splitlines():
        if line.startswith("from ") and "import *" in line:
            mod = os.path.join(os.path.dirname(path), line.split()[1] + ".py")
            names |= {n for n in defined(mod) if not n.startswith("_")}
    return names


def unknown_globals(path, known):
    """(function, name) for each global name a function of PATH uses that KNOWN lacks."""
    out = []

    def walk(t):
        for ch in t.get_children():
            for s in ch.get_symbols():
                if s.is_referenced() and s.is_global() and not s.is_assigned() and s.get_name() not in known:
                    out.append((ch.get_name(), s.get_name()))
            walk(ch)

    walk(symtable.symtable(open(path).read(), path, "exec"))
    return out


def unknown_attrs(path):
    """(line, module, attr) for each MODULE.attr of a module beside PATH that it lacks."""
    here, tree, alias, out = os.path.dirname(path), ast.parse(open(path).read()), {}, []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                mod = os.path.join(here, a.name + ".py")
                if os.path.exists(mod):
                    alias[a.asname or a.name] = defined(mod)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in alias and \
                node.attr not in alias[node.value.id]:
            out.append((node.lineno, node.value.id, node.attr))
    return out


def main():
    bad = 0
    for path in sys.argv[1:]:
        for fn, name in unknown_globals(path, defined(path) | set(dir(builtins))):
            print("%s: %s uses %s, defined nowhere" % (path, fn, name))
            bad += 1
        for line, mod, attr in unknown_attrs(path):
            print("%s:%d: %s.%s is defined nowhere" % (path, line, mod, attr))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
