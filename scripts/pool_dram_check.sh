#!/usr/bin/env bash
# The DRAM bytes CUPTI measured for the pool stage against the bytes pooling is declared to move (issue 6).
#
# usage: scripts/pool_dram_check.sh RESULTS.h5 INDEXPOOL [--dim 128] [--key-bytes 4] [--tolerance 0.05]
#
# Step 2 of scripts/gpu-profile-check.sh: for every point of a results file written with
# profile.counters = on, the pool stage's dram__bytes_read.sum + dram__bytes_write.sum must be within the
# tolerance of calls x (keys read + index written + index read), keys = tokens x dim x key bytes (fp32
# keys: 4), index = index_bytes_per_token x tokens. The first two terms are what the pooling kernel moves
# (bench/indexpool_bench.cc declares the same); the third is the stage's copy of the index to the host (the
# runner's PooledIndex lives in host memory), which reads the index back from the device. Without that term
# an H200 measured 1.178x (fp32) and 1.086x (fp16) on 2026-12-04; part of the read-back hits in L2, so the
# stage measures a little under its declared bytes. Reads the file with
# `INDEXPOOL inspect FILE --table ...` (no Python or h5py needed: the device image may have neither).
# Prints one line per point with the ratio; exit status 0 when every point has counters within the
# tolerance, 1 otherwise, 2 on bad arguments. Tested without a GPU (tests: experiments.PoolDramCheck.*).
set -uo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
[[ "${1:-}" == "-h" || "${1:-}" == "--help" ]] && { usage; exit 0; }
(($# >= 2)) || { usage >&2; exit 2; }
results=$1 bin=$2
shift 2
dim=128 key_bytes=4 tol=0.05
while (($#)); do
  case "$1" in
    --dim) dim=${2:?--dim needs a value}; shift 2 ;;
    --key-bytes) key_bytes=${2:?--key-bytes needs a value}; shift 2 ;;
    --tolerance) tol=${2:?--tolerance needs a value}; shift 2 ;;
    *) echo "pool_dram_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
num='^[0-9]+([.][0-9]+)?$'
for v in "$dim" "$key_bytes" "$tol"; do
  [[ "$v" =~ $num ]] || { echo "pool_dram_check: '$v' is not a non-negative number" >&2; exit 2; }
done
[[ -x "$bin" ]] || { echo "pool_dram_check: '$bin' is not an executable indexpool" >&2; exit 2; }

points=$("$bin" inspect "$results" --table points) || exit 1
listing=$("$bin" inspect "$results") || exit 1
# index, key, status, reason, tokens, index_bytes_per_token of every point, by column name, separated by
# the unit separator (0x1f): `read` would merge adjacent tabs (an empty reason).
rows=$(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
  { print $c["index"] "\037" $c["key"] "\037" $c["status"] "\037" $c["reason"] "\037" $c["tokens"] "\037" $c["index_bytes_per_token"] }' \
  <<<"$points")
[[ -n "$rows" ]] || { echo "   no points in $results"; exit 1; }
ok=1
while IFS=$'\037' read -r index key status reason tokens ibpt; do
  group=$(printf 'point_%06d' "$index")
  line=$(grep -F "  $group/ " <<<"$listing" | head -1)
  cstatus=$(sed -n 's/.*counters_status=\([^,]*\),.*/\1/p' <<<"$line")
  creason=$(sed -n 's/.*counters_reason=\(.*\), kernels_status=.*/\1/p' <<<"$line")
  if [[ "$status" != ok || "$cstatus" != ok ]] || ! counters=$("$bin" inspect "$results" --table "$group/counters" 2>/dev/null); then
    echo "   $key: no counters ($status/${cstatus:-?}): ${reason:-$creason}"
    ok=0
    continue
  fi
  if ! awk -F'\t' -v key="$key" -v tokens="$tokens" -v ibpt="$ibpt" -v dim="$dim" -v kb="$key_bytes" -v tol="$tol" '
    NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
    $c["stage"] == "pool" { v[$c["metric"]] = $c["value"]; n[$c["metric"]] = $c["calls"] }
    END {
      if (!("dram__bytes_read.sum" in v) || !("dram__bytes_write.sum" in v)) {
        printf "   %s: the pool stage has no dram__bytes_read.sum and dram__bytes_write.sum\n", key; exit 1
      }
      calls = n["dram__bytes_read.sum"]
      declared = calls * (tokens * dim * kb + 2 * ibpt * tokens)  # keys read, index written and read back
      measured = v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"]
      ratio = declared > 0 ? measured / declared : -1
      printf "   %s: pool calls %d, DRAM read %.1f MiB + written %.1f MiB = %.1f MiB vs declared %.1f MiB: ratio %.3f\n",
        key, calls, v["dram__bytes_read.sum"] / 1048576, v["dram__bytes_write.sum"] / 1048576, measured / 1048576,
        declared / 1048576, ratio
      d = ratio - 1; if (d < 0) d = -d
      if (ratio < 0 || d > tol) { printf "   FAIL: outside +-%g%%\n", 100 * tol; exit 1 }
    }' <<<"$counters"; then
    ok=0
  fi
  if kernels=$("$bin" inspect "$results" --table "$group/kernels" 2>/dev/null); then
    nk=$(($(wc -l <<<"$kernels") - 1))
    ((nk > 0)) && echo "   $nk kernel records, first: $(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "name") c = i } NR == 2 { print substr($c, 1, 80) }' <<<"$kernels")"
  fi
done <<<"$rows"
((ok))
