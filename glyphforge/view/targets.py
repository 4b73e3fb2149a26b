"""An example's targets as the page shows them: a caption, the objects of each frame (for overlays), a table."""
from __future__ import annotations

from typing import Any

import numpy as np

from glyphforge.view.sources import LabelIndex

#: Arrays an example's table leaves out (its pictures).
PICTURES = ("images", "masks")


def caption(index: LabelIndex, row: int, classes: list[str]) -> str:
    """Example ``row``'s labels as text: its class, or a scene's objects' classes (and ``= scene label``)."""
    labels = index.labels[row]
    shown = labels[:int(index.n_objects[row])] if index.n_objects is not None else labels
    text = " ".join(classes[label] if 0 <= label < len(classes) else str(label) for label in shown.tolist()
                    if label >= 0)
    return text if index.scene_label is None else f"{text} = {int(index.scene_label[row])}"


def image_size(row: dict[str, np.ndarray], frames: int) -> list[int]:
    """``[height, width]`` of the example's image (a video's frame)."""
    shape = row["images"].shape[1:3] if frames else row["images"].shape[:2]
    return [int(size) for size in shape]


def objects(row: dict[str, np.ndarray], frames: int, classes: list[str]) -> list[list[dict[str, Any]]]:
    """The objects each frame shows (one list for a still image): slot, id, class name and box ``[top, left, bottom,
    right]``; none for an example without boxes."""
    if "boxes" not in row:
        return []
    count = int(row["n_glyphs"]) if "n_glyphs" in row else row["boxes"].shape[-2]
    shown = []
    for frame in range(max(frames, 1)):
        at = {name: row[name][frame] if frames else row[name] for name in ("boxes", "labels", "ids", "visible")
              if name in row}
        boxes, labels, ids, visible = at["boxes"], at.get("labels"), at.get("ids"), at.get("visible")
        shown.append([
            {"slot": slot, "id": int(ids[slot]) if ids is not None else slot,
             "label": _name(int(labels[slot]), classes) if labels is not None else "",
             "box": [float(v) for v in boxes[slot]]}
            for slot in range(count)
            if boxes[slot][0] >= 0 and (visible is None or visible[slot])
        ])
    return shown


def table(row: dict[str, np.ndarray], classes: list[str]) -> dict[str, Any]:
    """Every target array of the example (all but its pictures) as lists; labels also as class names."""
    out: dict[str, Any] = {name: np.asarray(value).tolist() for name, value in row.items() if name not in PICTURES}
    if "label" in row:
        out["class"] = _name(int(row["label"]), classes)
    return out


def _name(label: int, classes: list[str]) -> str:
    """Class ``label``'s name (the number itself when out of the class list, -1 for none)."""
    return classes[label] if 0 <= label < len(classes) else str(label)
