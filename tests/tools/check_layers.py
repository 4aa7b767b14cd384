#!/usr/bin/env python3
"""Fails when a file under src/ includes a folder above its own layer.

The layers, lowest first, as docs/architecture.md describes them. A folder may
include itself, any folder below it and the public headers (vigil/); never one
above it. Usage: check_layers.py [path/to/repo]
"""
import pathlib
import re
import sys

LAYERS = [
    "core",       # errors, config, logging, deadlines, dtypes, threads
    "net",        # sockets, the wire codec
    "reduce",     # reduction kernels
    "bootstrap",  # root info, rendezvous, mesh, launcher environments
    "transport",  # data planes: tcp, shared memory
    "control",    # the control plane
    "algo",       # collective algorithms over a step runner, the algorithm table
    "comm",       # the communicator, its flight recorder, fault reports, hierarchy
    "symm",       # symmetric memory: the heap, one-sided calls
    "runtime",    # streams, events, groups
    "moe",        # MoE dispatch and combine
    "api",        # the C API
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    src = root / "src"
    level = {name: i for i, name in enumerate(LAYERS)}
    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    unknown = [f for f in folders if f not in level]
    if unknown:
        print(f"FAIL: src/{', src/'.join(unknown)} not in the layer list of {pathlib.Path(__file__).name}")
        return 1
    bad, checked, edges = [], 0, {}
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".hpp", ".cpp", ".h", ".def"):
            continue
        own = path.relative_to(src).parts[0]
        text = path.read_text()
        for match in INCLUDE.finditer(text):
            target = match.group(1)
            if target == "vigil" or target == own:
                continue
            checked += 1
            if target not in level:
                bad.append(f"{path.relative_to(root)}: includes unknown folder '{target}/'")
                continue
            edges.setdefault(own, set()).add(target)
            if level[target] > level[own]:
                line = text.count("\n", 0, match.start()) + 1
                bad.append(f"{path.relative_to(root)}:{line}: {own} (layer {level[own]}) includes "
                           f"{match.group(0).split()[-1]}, from {target} (layer {level[target]}) above it")
    for name in LAYERS:
        below = ", ".join(sorted(edges.get(name, ()), key=level.get)) or "-"
        print(f"  {level[name]:2d} {name:<10} includes {below}")
    for line in bad:
        print("FAIL:", line)
    if bad:
        print(f"{len(bad)} include(s) go up a layer; move the code down or the include up (docs/architecture.md)")
        return 1
    print(f"OK: {checked} includes across src/ folders, none goes up a layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
