"""IndexPool analysis: load results files, make the paper figures and the claims report.

    from analysis import load, FAMILIES, save
    res = load(["results/quickstart.h5"])
    fig = FAMILIES["memory"][0](res)
    save(fig, "results/figures", "memory")
"""
from .load import AnalysisError, NoData, Results, SchemaVersionError, load  # noqa: F401
from .common import save  # noqa: F401
from .figures import FAMILIES  # noqa: F401
from .claims import evaluate, write_report  # noqa: F401
