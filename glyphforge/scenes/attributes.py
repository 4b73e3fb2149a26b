"""Scene labels from the objects' attributes (class, colour, size), as dps's SetThreeAttr and BlueXAboveRedCircle.

``attribute_task="set"``: each object is a card of three attributes: its class (a shape,
or a font character), its colour (an index into the spec's ``colours``) and its size (one of
`SET_SIZES` times ``glyph_shape``); no two objects of a scene are the same card. The scene
label is 1 when some three objects form a set (in every attribute all the same or all
different), else 0. Each scene draws its label first (1 or 0, even odds): a positive scene
gets a random set at random slots, the rest random cards; a negative scene's cards are redrawn
until no three form a set (`SET_ROUNDS` rounds at most).

``attribute_task="above:blue x,red circle"``: slot 0 holds a blue ``x``, slot 1 a red ``circle``
(``"COLOUR CLASS,COLOUR CLASS"``: a colour of ``colours`` and a class), the other slots any other
pair of colour and class. The label is 1 when the first object's box centre lies above the
second's (a smaller row; in the first frame of a video), else 0: by the layout's symmetry, about
half the scenes.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The sizes of the set task's third attribute, as fractions of ``glyph_shape``.
SET_SIZES = (0.6, 0.8, 1.0)
#: The rounds a negative set scene is redrawn in before giving up.
SET_ROUNDS = 1000
#: The attribute tasks.
KINDS = ("set", "above")


@dataclass(frozen=True)
class Chosen:
    """What each scene holds: object counts ``(n,)``, every object's class, colour index (None: drawn as usual)
    and size scale (None: ``glyph_shape_jitter``'s), scene by scene, and the scene labels (None: none, or later)."""

    counts: np.ndarray
    labels: np.ndarray
    colour_index: np.ndarray | None = None
    scales: np.ndarray | None = None
    scene_label: np.ndarray | None = None


@dataclass(frozen=True)
class AttributeTask:
    """``kind`` ``"set"``, or ``"above"`` with ``pair``: the (class, colour) indices of the upper and lower object;
    ``text``: the task as written canonically (``"above:blue x,red circle"``)."""

    kind: str
    pair: tuple[tuple[int, int], tuple[int, int]] | None = None
    text: str = "set"

    def draw(self, rng: np.random.Generator, n: int, objects: tuple[int, int], n_classes: int, n_colours: int
             ) -> Chosen:
        """Draw ``n`` scenes of ``objects`` (fewest, most) objects each (module docstring)."""
        counts = rng.integers(objects[0], objects[1] + 1, n)
        if self.kind == "set":
            return _draw_sets(rng, counts, objects[1], (n_classes, n_colours, len(SET_SIZES)))
        assert self.pair is not None
        pairs = [(k, c) for k in range(n_classes) for c in range(n_colours) if (k, c) not in self.pair]
        picks = rng.integers(0, max(len(pairs), 1), int(counts.sum()) - 2 * n)
        others = np.array(pairs, np.int64).reshape(-1, 2)[picks]
        firsts = np.concatenate([[0], np.cumsum(counts - 2)[:-1]]).astype(np.int64)
        chosen = np.insert(others, np.repeat(firsts, 2), np.tile(np.array(self.pair, np.int64), (n, 1)), 0)
        return Chosen(counts.astype(np.int64), chosen[:, 0].copy(), chosen[:, 1].copy())

    def label_from_boxes(self, boxes: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
        """``above``: 1 where the object of slot 0 has its box centre above slot 1's (``boxes`` ``(M, 4)``, scene
        ``s`` owning rows from ``starts[s]``); None for ``set`` (labelled when drawn)."""
        if self.kind != "above":
            return None
        centre = boxes[:, 0] + boxes[:, 2]
        return (centre[starts] < centre[starts + 1]).astype(np.int64)


def choose(spec: Any, rng: np.random.Generator, n: int, class_names: tuple[str, ...]) -> Chosen:
    """What each of ``n`` scenes of ``spec`` (a `glyphforge.scenes.spec.ScatteredGlyphs`) holds: by its attribute task,
    by its reductions (`glyphforge.scenes.task.Task`), or ``min_glyphs`` to ``max_glyphs`` objects of random classes."""
    attribute_task, task = spec.attributes, spec.task
    if attribute_task is not None:
        return attribute_task.draw(rng, n, (spec.min_glyphs, spec.max_glyphs), len(class_names), len(spec.colours))
    if task is not None:
        counts, labels, scene_label = task.draw(rng, n, class_names)
        return Chosen(counts, labels, scene_label=scene_label)
    counts = rng.integers(spec.min_glyphs, spec.max_glyphs + 1, n)
    return Chosen(counts, rng.integers(0, len(class_names), int(counts.sum())))


def parse(text: Any, colours: tuple[tuple[int, int, int], ...], class_names: tuple[str, ...] | None,
          counts: tuple[int, int]) -> AttributeTask:
    """Check ``attribute_task`` against the spec's ``colours``, classes and object counts (min, max).

    Raises a ValueError naming ``attribute_task`` (or ``min_glyphs``/``max_glyphs``) and the rule.
    """
    from glyphforge.scenes.objects import colours as parse_colours

    if not isinstance(text, str) or text.partition(":")[0].strip() not in KINDS:
        raise ValueError(f"attribute_task must be 'set' or 'above:COLOUR CLASS,COLOUR CLASS' (e.g. 'above:blue x,red "
                         f"circle'), got {text!r}")
    if class_names is None:
        raise ValueError("attribute_task needs classes known before any data is read: use glyphs='shapes' or 'font'")
    kind, _, rest = (part.strip() for part in text.partition(":"))
    if kind == "set":
        cards = len(class_names) * len(colours) * len(SET_SIZES)
        if rest or counts[0] < 3 or counts[1] > cards:
            raise ValueError(
                f"attribute_task 'set' looks for three objects alike or all different in class, colour and size: "
                f"give it no argument, min_glyphs >= 3 and max_glyphs <= {cards} (the distinct cards of "
                f"{len(class_names)} classes, {len(colours)} colours and {len(SET_SIZES)} sizes); got {text!r}, "
                f"min_glyphs {counts[0]}, max_glyphs {counts[1]}"
            )
        return AttributeTask("set")
    objects = [item.split() for item in rest.split(",")]
    if len(objects) != 2 or any(len(item) != 2 for item in objects) or objects[0] == objects[1]:
        raise ValueError(f"attribute_task {text!r}: write two different objects as 'above:COLOUR CLASS,COLOUR CLASS', "
                         "e.g. 'above:blue x,red circle'")
    pair = []
    for colour, name in objects:
        rgb = parse_colours("attribute_task", colour)[0]
        if rgb not in colours or name not in class_names:
            raise ValueError(f"attribute_task {text!r} names {colour} {name}, but the colours are {list(colours)} and "
                             f"the classes {', '.join(class_names)}: add it to colours and characters")
        pair.append((class_names.index(name), colours.index(rgb)))
    if counts[0] < 2:
        raise ValueError(f"attribute_task {text!r} puts two objects in every scene: give min_glyphs >= 2")
    if counts[1] > 2 and len(class_names) * len(colours) <= 2:
        raise ValueError(f"attribute_task {text!r} fills slots past the first two with other pairs of colour and "
                         "class, and there are none: add colours or characters, or give max_glyphs 2")
    return AttributeTask("above", (pair[0], pair[1]), "above:" + ",".join(" ".join(item) for item in objects))


def has_set(cards: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Whether some three of each scene's first ``counts`` cards (int64 ``(n, G, attributes)``) form a set."""
    triples = np.array(list(itertools.combinations(range(cards.shape[1]), 3)), np.int64).reshape(-1, 3)
    values = cards[:, triples]  # (n, C, 3, attributes)
    first, second, third = values[:, :, 0], values[:, :, 1], values[:, :, 2]
    same = (first == second) & (second == third)
    different = (first != second) & (second != third) & (first != third)
    return ((same | different).all(-1) & (triples[:, 2] < counts[:, None])).any(1)


def _distinct(rng: np.random.Generator, n: int, most: int, total: int, taken: np.ndarray | None = None) -> np.ndarray:
    """``most`` distinct card numbers in ``[0, total)`` per scene, none of ``taken`` ``(n, k)``."""
    keys = rng.random((n, total))
    if taken is not None:
        np.put_along_axis(keys, taken, 2.0, 1)
    return np.argsort(keys, 1, kind="stable")[:, :most]


def _draw_sets(rng: np.random.Generator, counts: np.ndarray, most: int, shape: tuple[int, int, int]) -> Chosen:
    """Cards of the set task (module docstring); ``shape`` is the number of values of each attribute."""
    n, total = len(counts), int(np.prod(shape))
    positive = rng.integers(0, 2, n).astype(bool)
    cards = np.zeros((n, most, 3), np.int64)
    # positives: in each attribute with three values or more, the planted set is alike or all different (not alike
    # in every one: the three cards differ)
    wide = np.array(shape) >= 3
    modes = rng.integers(0, 2, (n, 3)).astype(bool) & wide
    modes[~modes.any(1), np.argmax(wide)] = True  # size always has three values
    keys = np.where(np.arange(max(shape)) < np.array(shape)[:, None], rng.random((n, 3, max(shape))), 2.0)
    values = np.argsort(keys, 2, kind="stable")[:, :, :3]  # three distinct values of each wide attribute
    planted = np.where(modes[:, None, :], values.transpose(0, 2, 1), values[:, None, :, 0])  # (n, 3 cards, 3)
    numbers = np.ravel_multi_index(tuple(planted.transpose(2, 0, 1)), shape)
    rest = _distinct(rng, n, most - 3, total, numbers)
    slots = np.argsort(np.where(np.arange(most) < counts[:, None], rng.random((n, most)), 2.0), 1, kind="stable")
    numbered = np.take_along_axis(np.concatenate([numbers, rest], 1), np.argsort(slots, 1), 1)
    cards[positive] = np.stack(np.unravel_index(numbered[positive], shape), -1)
    pending = np.flatnonzero(~positive)
    for _ in range(SET_ROUNDS):
        if not len(pending):
            break
        drawn = np.stack(np.unravel_index(_distinct(rng, len(pending), most, total), shape), -1)
        cards[pending] = drawn
        pending = pending[has_set(drawn, counts[pending])]
    if len(pending):
        raise ValueError(f"could not draw {counts[pending[0]]} cards with no set in {SET_ROUNDS} tries: so many cards "
                         "of these classes, colours and sizes nearly always hold a set; lower max_glyphs, or add "
                         "colours or characters")
    filled = np.arange(most) < counts[:, None]
    chosen = cards[filled]
    return Chosen(counts.astype(np.int64), chosen[:, 0].copy(), chosen[:, 1].copy(),
                  np.array(SET_SIZES)[chosen[:, 2]], positive.astype(np.int64))
