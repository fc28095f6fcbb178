"""``rfabric presets``: the topology presets shipped with rfabric, by name."""

from __future__ import annotations


def preset_rows() -> list[dict]:
    """One row per shipped preset: name, family, gpus, link (its [params]) and file."""
    from ..errors import read_toml
    from ..topologies import presets

    rows = []
    for name, path in presets().items():
        doc = read_toml(path, "topology")
        params = doc.get("params", {})
        rows.append(
            {
                "name": name,
                "family": doc.get("family", ""),
                "gpus": params.get("gpus", ""),
                "link": params.get("link", ""),
                "file": str(path),
            }
        )
    return rows


def cmd_presets(args) -> int:
    """Print the shipped presets (``rfabric run NAME``, ``rfabric cost NAME`` and
    ``rfabric collective --topology NAME`` take these names)."""
    from ..tables import format_table

    rows = preset_rows()
    cols = ["name", "family", "gpus", "link"] + (["file"] if args.paths else [])
    print(format_table(rows, cols, align="left"))
    return 0
