#!/usr/bin/env python3
"""layers.py -- checks the layering of src/lib (see src/lib/README).

Usage: layers.py LIBDIR

Reads the layers, lowest first, from LIBDIR/README's "Layers, lowest
first:" line.  Fails (exit 1, one line per fault) when a file includes
the header of a higher layer, another folder's *_private.h, a header
of the library's own without its folder, or when the files of a folder
include each other's headers in a cycle, or when a command's source
includes anything of the library but gpuckpt.h.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
OWN_TOP = {"private.h", "gpuckpt.h", "config.h"}


def layers_of(libdir):
    with open(os.path.join(libdir, "README")) as f:
        for line in f:
            if line.startswith("Layers, lowest first:"):
                return line.split(":", 1)[1].split()
    sys.exit("layers.py: no 'Layers, lowest first:' line in README")


def sources(d):
    for name in sorted(os.listdir(d)):
        if name.endswith((".c", ".h")) and ".pb-c." not in name:
            yield os.path.join(d, name)


def check(libdir):
    faults = []
    layers = layers_of(libdir)
    rank = {name: i for i, name in enumerate(layers)}
    for name in sorted(os.listdir(libdir)):
        p = os.path.join(libdir, name)
        if os.path.isdir(p) and name not in rank and not name.startswith("."):
            faults.append("%s/: a folder that is no layer" % name)
    for p in sources(libdir):
        for inc in INCLUDE.findall(open(p).read()):
            if "/" in inc:
                faults.append("%s: includes %s, of a layer, from the top"
                              % (os.path.basename(p), inc))
    for layer in layers:
        d = os.path.join(libdir, layer)
        if not os.path.isdir(d):
            faults.append("%s/: a layer without its folder" % layer)
            continue
        edges = {}
        for p in sources(d):
            me = "%s/%s" % (layer, os.path.basename(p))
            for inc in INCLUDE.findall(open(p).read()):
                if "/" not in inc:
                    if inc not in OWN_TOP and not inc.startswith("criu-"):
                        if os.path.exists(os.path.join(d, inc)):
                            faults.append("%s: includes %s without its "
                                          "folder" % (me, inc))
                    continue
                folder, header = inc.split("/", 1)
                if folder not in rank:
                    continue
                if rank[folder] > rank[layer]:
                    faults.append("%s: includes %s, of the higher layer "
                                  "%s/" % (me, inc, folder))
                if folder != layer and header.endswith("_private.h"):
                    faults.append("%s: includes %s, private to %s/"
                                  % (me, inc, folder))
                if folder == layer:
                    a = os.path.splitext(os.path.basename(p))[0]
                    b = os.path.splitext(header)[0]
                    if a != b:
                        edges.setdefault(a, set()).add(b)
        faults.extend(cycles(layer, edges))
    return faults


def cycles(layer, edges):
    """The cycles among a folder's modules: A includes B's header..."""
    faults, state = [], {}

    def visit(n, path):
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                loop = path[path.index(m):] + [m]
                faults.append("%s/: a cycle: %s" % (layer, " -> ".join(loop)))
            elif m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n, [n])
    return faults


def check_commands(srcdir):
    faults = []
    for d in sorted(os.listdir(srcdir)):
        p = os.path.join(srcdir, d)
        if d == "lib" or not os.path.isdir(p):
            continue
        for f in sources(p):
            for inc in INCLUDE.findall(open(f).read()):
                if inc == "private.h" or "/" in inc:
                    faults.append("%s/%s: includes %s, the library's own"
                                  % (d, os.path.basename(f), inc))
    return faults


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: layers.py LIBDIR")
    libdir = sys.argv[1]
    faults = check(libdir) + check_commands(os.path.dirname(
        os.path.abspath(libdir)))
    for f in faults:
        print("layers.py: " + f)
    sys.exit(1 if faults else 0)


if __name__ == "__main__":
    main()
