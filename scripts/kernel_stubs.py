#!/usr/bin/env python3
"""Fails when two CUDA objects of a build define the same kernel with external linkage.

usage: kernel_stubs.py BUILD_DIR

nvcc gives every __global__ function a host stub, an ordinary external function of the object file that
defines the kernel. A kernel that is not a template, defined in a header (kernels/topk.cuh's), is then
defined again by every .cu file that includes the header: a program linking two such objects (a test
beside the kernels library) fails with "multiple definition", or links only while the static library's
member happens to stay out. Template kernels are weak symbols and do not count. Reads `nm --defined-only`
of every *.cu.o under BUILD_DIR (the CMake build directory); prints each stub defined more than once with
its objects and exits 1, or says how many objects and stubs it read and exits 0. Exit 2: no objects.
"""
import os
import subprocess
import sys


def stubs(obj):
    out = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "T" and "__device_stub__" in parts[2]:
            yield parts[2]


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(argv) != 2 else sys.stdout)
        return 0 if len(argv) == 2 else 2
    objs = sorted(os.path.join(d, f) for d, _, files in os.walk(argv[1]) for f in files
                  if f.endswith(".cu.o") and "CompilerId" not in d)
    if not objs:
        print(f"kernel_stubs: no CUDA objects (*.cu.o) under '{argv[1]}'", file=sys.stderr)
        return 2
    where = {}
    for o in objs:
        for s in stubs(o):
            where.setdefault(s, []).append(os.path.relpath(o, argv[1]))
    twice = {s: at for s, at in where.items() if len(at) > 1}
    for s, at in sorted(twice.items()):
        print(f"kernel_stubs: {s} defined in {len(at)} objects: {', '.join(at)}")
    if twice:
        print(f"kernel_stubs: {len(twice)} kernels defined more than once (a header that defines kernels which "
              "are not templates is included by more than one .cu file)", file=sys.stderr)
        return 1
    print(f"kernel_stubs: {len(objs)} CUDA objects, {len(where)} external kernel stubs, each defined once")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
