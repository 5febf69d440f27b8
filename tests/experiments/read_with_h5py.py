#!/usr/bin/env python3
"""Checks that h5py and pandas read a results file written by make_results_file (values hard-coded there).

Usage: read_with_h5py.py FILE.h5. Exits non-zero on any mismatch, and when h5py or pandas cannot be
imported (python3-h5py and python3-pandas are declared dependencies, see scripts/setup-deps.sh)."""
import sys

import h5py
import pandas


def main(path):
    with h5py.File(path, "r") as f:
        assert int(f.attrs["schema_version"]) == 1, f.attrs["schema_version"]
        assert f.attrs["sweep_id"] == b"h5py-check" or f.attrs["sweep_id"] == "h5py-check", f.attrs["sweep_id"]
        assert int(f.attrs["points_total"]) == 3
        df = pandas.DataFrame(f["points"][:])
        steps = pandas.DataFrame(f["point_000001/steps"][:])
        groups = sorted(k for k in f.keys() if k.startswith("point_"))

    expected_columns = ["index", "key", "pool.weighting", "topk.tokens", "status", "reason",
                        "run_backend", "run_device", "tokens", "index_bytes_per_token", "exact_bytes_per_token", "macs_per_query",
                        "exact_macs_per_query", "token_recall", "block_recall", "mass_recall", "output_error",
                        "pool_ms", "score_ms", "topk_ms", "attention_ms", "wall_s", "cache_l1_hit_rate",
                        "cache_l2_hit_rate", "cache_l3_hit_rate", "cache_hit_rate", "cache_opt_hit_rate",
                        "cache_opt_single_hit_rate",
                        "layer_ms", "local_ms", "local_prefill_ms", "layer_output_error", "layer_mass_recall",
                        "layer_tokens_per_step", "repooled_fraction_mean", "pool_hidden_ms", "tokens_per_group"]
    assert list(df.columns) == expected_columns, list(df.columns)
    assert len(df) == 3, len(df)
    assert df["index"].tolist() == [0, 1, 2], df["index"].tolist()
    assert str(df["index"].dtype) == "int64", df["index"].dtype
    assert str(df["wall_s"].dtype) == "float64", df["wall_s"].dtype
    assert df["pool.weighting"].tolist() == [b"mean", b"max", b"mean"], df["pool.weighting"].tolist()
    assert df["topk.tokens"].tolist() == [b"512", b"512", b"2048"], df["topk.tokens"].tolist()
    assert df["key"].tolist()[2] == b"pool.weighting=mean;topk.tokens=2048", df["key"].tolist()
    assert df["status"].tolist() == [b"ok", b"ok", b"skipped"], df["status"].tolist()
    assert df["reason"].tolist() == [b"", b"", b"k exceeds the context"], df["reason"].tolist()
    assert df["run_backend"].tolist() == [b"cpu"] * 3, df["run_backend"].tolist()
    assert df["index_bytes_per_token"].tolist() == [16.0, 32.0, 48.0]
    assert df["token_recall"].tolist() == [0.5, 0.75, 1.0]
    assert df["tokens"].tolist() == [4096.0] * 3
    assert df["wall_s"].tolist() == [1.5] * 3
    assert list(steps.columns[:2]) == ["request", "step"] and len(steps) == 4, steps
    assert groups == ["point_000000", "point_000001", "point_000002"], groups
    print(f"read_with_h5py: {path}: {len(df)} points, {len(df.columns)} columns, h5py {h5py.__version__}, "
          f"pandas {pandas.__version__}: ok")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: read_with_h5py.py FILE.h5")
    main(sys.argv[1])
