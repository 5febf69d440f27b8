#!/usr/bin/env bash
# CUDA compiler launcher of the kernels library (kernels/CMakeLists.txt). Runs the compile command it is
# given, unchanged. What ptxas reports for each kernel with --resource-usage (registers, stack frame,
# spill stores and loads, shared memory, for each architecture) goes to <object>.resources.txt, which
# scripts/kernel_resources.py reads; every other line of the compiler's stderr (warnings, errors) is passed
# on. The exit status is the compiler's.
set -u
obj=
prev=
for a in "$@"; do
  [[ $prev == -o ]] && obj=$a
  prev=$a
done
[[ -n $obj ]] || exec "$@"
log=$obj.resources.txt
"$@" 2> "$log.tmp"
rc=$?
grep -v -E '^ptxas info +:|^ +[0-9]+ bytes stack frame, ' "$log.tmp" >&2
if [[ $rc -eq 0 ]]; then
  mv -f "$log.tmp" "$log"
else
  rm -f "$log.tmp" "$log"
fi
exit $rc
