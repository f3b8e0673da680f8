"""Chart of a results file: time (and extra peak memory, where measured) of each implementation
per shape and pass, one column per dtype, on log axes (the shapes span two orders of
magnitude). Needs matplotlib (the `bench` extra).

    python benchmarks/plot_results.py benchmarks/results/h200.json docs/h200-bench.png
"""

import json
import sys
from collections import defaultdict


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = json.load(open(argv[0]))
    dtypes = sorted({r["dtype"] for r in records})
    impls = list(dict.fromkeys(r["impl"] for r in records))
    with_memory = any(r.get("peak_mib") is not None for r in records)
    rows = 2 if with_memory else 1
    figure, axes = plt.subplots(rows, len(dtypes), figsize=(8 * len(dtypes), 4.5 * rows),
                                squeeze=False)
    for column, dtype in enumerate(dtypes):
        cells = defaultdict(dict)
        for r in records:
            if r["dtype"] == dtype:
                cells[(r["shape"].split("-")[0], r["pass"])][r["impl"]] = r
        labels = [f"{shape}\n{kind}" for shape, kind in cells]
        for row, (field, unit) in enumerate([("ms", "time (ms)"), ("peak_mib", "extra peak (MiB)")]
                                            [:rows]):
            ax = axes[row][column]
            width = 0.8 / len(impls)
            for index, impl in enumerate(impls):
                values = [cell.get(impl, {}).get(field) or float("nan")
                          for cell in cells.values()]
                ax.bar([x + index * width for x in range(len(cells))], values, width,
                       label=impl)
            ax.set_xticks([x + width * (len(impls) - 1) / 2 for x in range(len(cells))])
            ax.set_xticklabels(labels, fontsize=8)
            ax.set_ylabel(unit)
            ax.set_yscale("log")
            ax.set_title(f"{dtype}: {unit.split(' (')[0]}")
            ax.legend(fontsize=8)
    figure.suptitle(argv[0].rsplit("/", 1)[-1])
    figure.tight_layout()
    figure.savefig(argv[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
