"""Loads one or many results files (whole sweeps or shards) into pandas, checking schema_version.

    res = load(["results/quickstart.h5"])
    res.points                 # one row per point, every file: axis and setting columns, numbers, provenance
    res.ok                     # the rows with status "ok"
    res.detail("steps")        # a per-point dataset of every ok point, long form, keyed by (file, index)
"""
import os
import re
import shlex
import warnings
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd

from . import schema


class AnalysisError(Exception):
    """An error the command line reports as one clear message (no traceback)."""


class SchemaVersionError(AnalysisError):
    pass


class NoData(AnalysisError):
    """The loaded results do not hold what a figure or claim needs."""


def _text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        return _text(v.item())
    return v


_SIZE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|K|M|G)?\s*$")
_UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 1000, "M": 1000**2, "G": 1000**3}


def parse_size(s):
    """'64Ki' -> 65536, '2048' -> 2048; None for anything else."""
    m = _SIZE.match(str(s))
    if not m:
        return None
    v = float(m.group(1)) * _UNITS[m.group(2)]
    return int(v) if v == int(v) else v


def resolved_settings(attrs):
    """The config as the run resolved it: the file's text, the environment notes the runner appends to it,
    then --set overrides from argv. Returns {key: [values]} (values as written: lists stay lists)."""
    out = {}
    section = ""
    cache_size = None  # INDEXPOOL_CACHE_SIZE: the runner sets the last cache level's capacity after --set
    for raw in str(attrs.get("config_text", "")).splitlines():
        line = raw.strip()
        env = re.match(r"#\s*environment:\s*INDEXPOOL_PRECISION=(.*)$", line)
        if env:
            out["pool.precision"] = [v.strip() for v in env.group(1).split(",")]
            continue
        env = re.match(r"#\s*environment:\s*INDEXPOOL_CACHE_SIZE=(.*)$", line)
        if env:
            cache_size = parse_size(env.group(1).strip())
            continue
        if not line or line[0] in "#;":
            continue
        if " #" in line:
            line = line[: line.index(" #")].strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
            continue
        if "=" not in line:
            continue
        key, value = (x.strip() for x in line.split("=", 1))
        out[f"{section}.{key}" if section else key] = [v.strip() for v in value.split(",")]
    try:
        argv = shlex.split(str(attrs.get("argv", "")))
    except ValueError:
        argv = str(attrs.get("argv", "")).split()
    for i, a in enumerate(argv):
        kv = argv[i + 1] if a == "--set" and i + 1 < len(argv) else a[6:] if a.startswith("--set=") else None
        if kv and "=" in kv:
            key, value = (x.strip() for x in kv.split("=", 1))
            out[key] = [v.strip() for v in value.split(",")]
    if cache_size is not None:  # as experiments/config.cc applies it: the last level's capacity in bytes
        size = _binary_size(int(cache_size))
        out["cache.levels"] = [" ".join(lv[:-1] + [lv[-1][:lv[-1].rfind(":")] + ":" + size]) if lv else v
                               for v in out.get("cache.levels", [schema.KEY_DEFAULTS["cache.levels"]])
                               for lv in [v.split()]]
    return out


def _binary_size(n):
    """65536 -> '64KiB', 1000 -> '1000B': a capacity as the runner writes it (cache_sim's Capacity::text)."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


def set_overrides(argv):
    """The --set KEY=VALUE overrides of a run's argv (shell-quoted, as the root attribute holds it), as
    written; output.path is left out (it names the file, not the data)."""
    try:
        words = shlex.split(str(argv or ""))
    except ValueError:
        words = str(argv or "").split()
    out = []
    for i, a in enumerate(words):
        kv = words[i + 1] if a == "--set" and i + 1 < len(words) else a[6:] if a.startswith("--set=") else None
        if kv and "=" in kv and kv.split("=", 1)[0].strip() != "output.path":
            out.append(kv)
    return out


def config_text(config_path, argv):
    """'configs/x.ini --set workload.tokens=16Ki': the config a run read and the overrides it was given."""
    sets = set_overrides(argv)
    return (config_path or "?") + "".join(f" --set {shlex.quote(kv)}" for kv in sets)


@dataclass
class FileInfo:
    path: str
    attrs: dict
    settings: dict
    axes: list = field(default_factory=list)


def _open(path):
    if not os.path.exists(path):
        raise AnalysisError(f"{path}: no such file")
    if os.path.isdir(path):
        raise AnalysisError(f"{path}: a directory, not a results file (give the .h5 files in it)")
    if not os.path.isfile(path):  # h5py would wait on a FIFO for a writer for ever
        raise AnalysisError(f"{path}: not a regular file (a FIFO, socket or device), not a results file")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        why = (getattr(e, "strerror", None) or str(e).strip().splitlines()[0] if str(e).strip() else "")
        why = re.sub(r"^Unable to synchronously open file \((.*)\)$", r"\1", why)[:160]
        raise AnalysisError(f"{path}: not an HDF5 results file" + (f" ({why})" if why else "")) from None


def _read_file(path):
    with _open(path) as f:
        attrs = {k: _text(f.attrs[k]) for k in f.attrs.keys()}
        if "schema_version" not in attrs:
            raise SchemaVersionError(f"{path}: no schema_version attribute; not an IndexPool results file "
                                     f"(this analysis reads schema_version {schema.SCHEMA_VERSION})")
        try:
            version = int(attrs["schema_version"])
        except (TypeError, ValueError):
            version = attrs["schema_version"]
        if version != schema.SCHEMA_VERSION:
            raise SchemaVersionError(f"{path}: schema_version {version}, but this analysis reads schema_version "
                                     f"{schema.SCHEMA_VERSION}; regenerate the file with a matching indexpool or "
                                     f"update analysis/")
        if "points" not in f:
            raise AnalysisError(f"{path}: no /points table")
        table = f["points"][:]
    df = pd.DataFrame(table)
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].map(_text)
    missing = [c for c in schema.POINT_ID_COLUMNS if c not in df.columns]
    if missing:
        raise AnalysisError(f"{path}: /points lacks the columns {', '.join(missing)}")
    known = set(schema.POINT_ID_COLUMNS) | set(schema.RUN_COLUMNS) | set(schema.NUMBER_COLUMNS)
    axes = [c for c in df.columns if c not in known and df[c].dtype == object]
    info = FileInfo(path=path, attrs=attrs, settings=resolved_settings(attrs), axes=axes)
    return info, df


def _bool(v):
    """config.cc's parse_bool spellings -> True / False (None for anything else)."""
    t = str(v).strip().lower()
    return True if t in schema.TRUE_WORDS else False if t in schema.FALSE_WORDS else None


def _memo(fn):
    """fn(v) per value of a column, computed once per distinct (type, value): the same values Series.map(fn)
    gives (fn is pure), without a call per row."""
    seen = {}

    def f(v):
        k = (type(v), v)
        try:
            return seen[k]
        except KeyError:
            out = seen[k] = fn(v)
            return out
        except TypeError:  # unhashable
            return fn(v)
    return f


def _complete(df, info):
    """Adds a column for every KEY_DEFAULTS key that was not an axis, typed numbers, and provenance.

    The columns are built in a dict and joined to df once (one insert per column made pandas copy and
    reindex its blocks ~65 times a file); the result is the frame the column-by-column version gave: df's own
    columns in place (the typed keys among them converted), then the keys added, the text of the typed keys
    (KEY#s), context, file, the attr.* columns, run#read, and run_backend / run_device where df lacks them."""
    cols = dict(df.items())
    added = {}
    for key, default in schema.KEY_DEFAULTS.items():
        if key in cols:
            continue
        if key == schema.BACKEND and key not in info.settings:
            value = info.attrs.get("backend") or default
        else:
            values = info.settings.get(key, [default])
            value = values[0] if len(values) == 1 else ",".join(values)
        added[key] = _constant(value, df.index)
    cols.update(added)
    typed = {}
    text = {key: pd.Series(cols[key], index=df.index) if isinstance(cols[key], np.ndarray) else cols[key]
            for key in schema.INT_KEYS + schema.FLOAT_KEYS + schema.BOOL_KEYS}
    for key in schema.INT_KEYS:
        typed[key] = text[key].map(_memo(parse_size))
    for key in schema.FLOAT_KEYS:
        typed[key] = pd.to_numeric(text[key].where(text[key] != ""), errors="coerce")
    for key in schema.BOOL_KEYS:
        typed[key] = text[key].map(_memo(_bool))
    for key in schema.INT_KEYS + schema.FLOAT_KEYS + schema.BOOL_KEYS:  # typed; text kept under key + "#s"
        cols[key] = typed[key]
    cols.update({key + "#s": text[key] for key in text})
    # Context length: the nominal T of a synthetic workload (the same across seeds), else the measured mean.
    synthetic = np.asarray(cols["workload.source"] == "synthetic")
    cols["context"] = np.where(synthetic, cols["workload.tokens"], cols["tokens"]).astype(float)
    cols["file"] = _constant(info.path, df.index)
    for a in ("sweep_id", "host", "device", "tool_version", "config_path", "argv"):
        cols["attr." + a] = _constant(str(info.attrs.get(a, "")), df.index)
    cols["attr.git_revision"] = _constant(revisions(info.attrs), df.index)
    # What each point ran on. Files from before run_backend/run_device: the old reading (the configured
    # backend, and the root attribute "device"), marked as such.
    cols[schema.RUN_COLUMNS_READ] = _constant(all(c in df.columns for c in schema.RUN_COLUMNS), df.index)
    if schema.RUN_BACKEND not in cols:
        cols[schema.RUN_BACKEND] = cols[schema.BACKEND]
    if schema.RUN_DEVICE not in cols:
        cols[schema.RUN_DEVICE] = cols["attr.device"]
    return pd.DataFrame(cols, index=df.index)


def _constant(value, index):
    """A column of `value` on every row, typed as df[key] = value types it (text: object)."""
    if isinstance(value, str):
        return np.full(len(index), value, dtype=object)
    if isinstance(value, bool):
        return np.full(len(index), value, dtype=bool)
    return pd.Series(value, index=index)


def revisions(attrs):
    """The git revisions a file's points came from: the root attribute git_revision (the run that created the
    file, or a merged file's first input), and any other that resumed_by's lines (a resuming run's tool version,
    'indexpool 0.1.0 (git 0123456789ab; ...') or merged_from's (each input's 'git revision X,' and the runs that
    resumed it) name: 'a14b21c2b117 (some points written at 0995c8c59b3d)'."""
    first = str(attrs.get("git_revision") or "")
    text = str(attrs.get("resumed_by") or "") + "\n" + str(attrs.get("merged_from") or "")
    later = []
    for m in re.finditer(r"\(git ([^;)\s]+)[;)]|git revision ([^,\s)]+)[,)]", text):
        rev = m.group(1) or m.group(2)
        if rev not in (first, "?") and rev not in later:
            later.append(rev)
    return f"{first} (some points written at {', '.join(later)})" if later else first


def _detail_frame(items):
    """[((file, index), array)] -> one frame with file and index columns in front: the frame that a frame per
    point (text columns decoded) concatenated gives, built at once where the arrays share one record type."""
    if not items:
        return pd.DataFrame()
    arrays = [a for _, a in items]
    first = arrays[0]
    if first.ndim == 1 and first.dtype.names and all(a.ndim == 1 and a.dtype == first.dtype for a in arrays):
        d = pd.DataFrame(np.concatenate(arrays))
        for c in d.columns:
            if d[c].dtype == object:
                d[c] = d[c].map(_text)
        lens = [len(a) for a in arrays]
        d.insert(0, "index", np.repeat(np.array([k[1] for k, _ in items], dtype=np.int64), lens))
        d.insert(0, "file", np.repeat(np.array([k[0] for k, _ in items], dtype=object), lens))
        return d
    frames = []  # record types differ between points: a frame each, as pandas joins them
    for (path, idx), a in items:
        d = pd.DataFrame(a)
        for c in d.columns:
            if d[c].dtype == object:
                d[c] = d[c].map(_text)
        d.insert(0, "index", int(idx))
        d.insert(0, "file", path)
        frames.append(d)
    return pd.concat(frames, ignore_index=True)


def _only_keys(frame, keys):
    """The rows of a detail frame whose (file, index) is one of keys, in the frame's order."""
    if not len(frame) or "file" not in frame.columns or "index" not in frame.columns:
        return frame
    want = {(str(f), int(i)) for f, i in keys}
    mask = [(f, int(i)) in want for f, i in zip(frame["file"], frame["index"])]
    return frame[np.array(mask, dtype=bool)].reset_index(drop=True)


@dataclass
class Results:
    points: pd.DataFrame
    files: list
    _detail: dict = field(default_factory=dict)

    @property
    def ok(self):
        return self.points[self.points["status"] == "ok"]

    def detail(self, name, keys=None):
        """Dataset point_NNNNNN/<name> of every ok point, concatenated, with file and index columns (empty
        frame when no point has it). keys: only these points ((file, index) pairs; those not ok are left out),
        the same rows as the full frame filtered to them, without reading the other points."""
        if name in self._detail:
            full = self._detail[name]
            return full if keys is None else _only_keys(full, keys)
        want = None if keys is None else {(str(f), int(i)) for f, i in keys}
        raw = self._detail.setdefault("#raw:" + name, {})  # {(file, index): the dataset's array, None: none}
        order = []
        for path, rows in self.ok.groupby("file", sort=False):
            idxs = [int(i) for i in rows["index"]]
            if want is not None:
                idxs = [i for i in idxs if (path, i) in want]
            todo = [i for i in idxs if (path, i) not in raw]
            if todo:
                with _open(path) as f:
                    for idx in todo:
                        ds = f.get(f"point_{idx:06d}/{name}")
                        raw[(path, idx)] = None if ds is None else ds[:]
            order.extend((path, i) for i in idxs)
        out = _detail_frame([(k, raw[k]) for k in order if raw[k] is not None])
        if keys is None:
            self._detail[name] = out
            del self._detail["#raw:" + name]
        return out

    def detail_keys(self, name):
        """(file, index) of the ok points whose dataset point_NNNNNN/<name> has rows (the points detail(name)
        holds), in detail()'s order, reading no data."""
        if name in self._detail:
            full = self._detail[name]
            if not len(full) or "file" not in full.columns or "index" not in full.columns:
                return []
            return list(dict.fromkeys(zip(full["file"], full["index"])))
        got = self._detail.get("#keys:" + name)
        if got is None:
            raw = self._detail.get("#raw:" + name, {})
            got = []
            for path, rows in self.ok.groupby("file", sort=False):
                with _open(path) as f:
                    for idx in (int(i) for i in rows["index"]):
                        if (path, idx) in raw:
                            a = raw[(path, idx)]
                            has = a is not None and len(a) > 0
                        else:
                            ds = f.get(f"point_{idx:06d}/{name}")
                            has = ds is not None and len(ds.shape) > 0 and ds.shape[0] > 0
                        if has:
                            got.append((path, idx))
            self._detail["#keys:" + name] = got
        return list(got)

    def point_attrs(self, names=schema.PROFILE_ATTRS, rows=None):
        """Attributes `names` of the groups point_NNNNNN of `rows` (default: every point), one row per point
        with file and index columns; an attribute a group lacks is None."""
        rows = self.points if rows is None else rows
        out = []
        for path, g in rows.groupby("file", sort=False):
            with _open(path) as f:
                for idx in g["index"]:
                    grp = f.get(f"point_{int(idx):06d}")
                    a = grp.attrs if grp is not None else {}
                    out.append(dict(file=path, index=int(idx), **{n: _text(a[n]) if n in a else None for n in names}))
        return pd.DataFrame(out, columns=["file", "index", *names])

    def provenance(self, rows):
        """One line naming the files, sweep ids, configs and devices the given rows came from."""
        parts = []
        for path, g in rows.groupby("file", sort=False):
            r = g.iloc[0]
            ran = sorted({f"{b} ({d})" if d else b for b, d in zip(g[schema.RUN_BACKEND], g[schema.RUN_DEVICE])})
            rev = r.get("attr.git_revision", "") or "?"
            parts.append(f"{os.path.basename(path)} (config {config_text(r['attr.config_path'], r.get('attr.argv', ''))}, "
                         f"sweep {r['attr.sweep_id']}, revision {rev}, backend {', '.join(sorted(g['backend'].unique()))}, "
                         f"host {r['attr.host']}, ran on: {'; '.join(ran)})")
        return "; ".join(parts)

    def incomplete(self):
        """One line for each sweep whose files hold fewer of its points than it has (root attribute points_total:
        shards missing, or a run stopped early): 'sweep 1a2b3c4d5e6f7a8b: 38 of 56 points in the given files'."""
        totals = {}
        for info in self.files:
            try:
                total = int(info.attrs.get("points_total"))
            except (TypeError, ValueError):
                continue
            sid = str(info.attrs.get("sweep_id", ""))
            totals[sid] = max(totals.get(sid, 0), total)
        out = []
        for sid, total in totals.items():
            held = int((self.points["attr.sweep_id"] == sid).sum())
            if held < total:
                out.append(f"sweep {sid}: {held} of {total} points in the given files")
        return out

    def file_provenance(self):
        """Per input file: path, tool version, git revision, argv, when it was written, config and sweep id
        (root attributes; '?' where a file lacks one)."""
        out = []
        for info in self.files:
            a = info.attrs
            out.append({"path": info.path, "tool_version": a.get("tool_version") or "?",
                        "git_revision": a.get("git_revision") or "?", "argv": a.get("argv") or "?",
                        "created_utc": a.get("created_utc") or "?", "config_path": a.get("config_path") or "?",
                        "sweep_id": a.get("sweep_id") or "?",
                        "merged_from": "; ".join(str(a.get("merged_from") or "").splitlines()),
                        "resumed_by": "; ".join(str(a.get("resumed_by") or "").splitlines()),
                        "imported_workloads": "; ".join(str(a.get("imported_workloads") or "").splitlines()),
                        "points": int((self.points["file"] == info.path).sum())})
        return out


def load(paths):
    """Reads every file (a path or a list of paths). Files of one sweep (shards) join into one table; a
    point held by two files of the same sweep is kept once (with a warning)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise AnalysisError("no results files given")
    infos, frames = [], []
    for p in paths:
        info, df = _read_file(str(p))
        infos.append(info)
        frames.append(_complete(df, info))
    points = pd.concat(frames, ignore_index=True, sort=False)
    # A sweep axis of one file is no column of the others: their rows get the value their own config set
    # (one value), so that figures compare like with like; a key a file leaves at its default stays NaN there.
    for key in sorted({a for info in infos for a in info.axes} - set(schema.KEY_DEFAULTS)):
        for info in infos:
            if key in info.axes:
                continue
            values = info.settings.get(key)
            if values is not None and len(values) == 1:
                points.loc[points["file"] == info.path, key] = values[0]
    dup = points.duplicated(subset=["attr.sweep_id", "key"], keep="first")
    if dup.any():
        warnings.warn(f"{int(dup.sum())} points appear in more than one file of the same sweep; kept the first")
        points = points[~dup].reset_index(drop=True)
    return Results(points=points, files=infos)
