"""The report the anchors' scripts share: $OUT/<file> (default OUT: /tmp/anchors_out) in
the figure format `cubert bench --compare` reads (`figures.NAME = {value, unit, note}`),
and one line per figure on stdout."""

import json
import os


def write_report(file_name, report, digits=2):
    """Writes `report` (with its `figures`) as $OUT/`file_name`, prints each figure with
    `digits` decimals, and returns the file's path."""
    out = os.environ.get("OUT", "/tmp/anchors_out")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, file_name)
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    for name, figure in report["figures"].items():
        print(f"{name}: {figure['value']:.{digits}f} {figure['unit']}")
    return path
