"""The label task of a scene: a scene label reducing its digits, as dps's visual arithmetic.

``reductions`` is one reduction name (``"sum"``: every scene's label is the sum of its
digits) or a map from operator classes to reductions (``"A:sum,M:prod"``: each scene
also shows one operator glyph, in slot 0, and its class chooses the reduction). A scene
holds ``min_digits`` to ``max_digits`` digits (glyphs of the classes named by one decimal
digit, ``"0"`` to ``"9"``, that are not operators); its label is the reduction of their
values, capped at ``largest_digit`` (None: no cap). The reduction of no digits is 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The reductions by name (``count`` is dps's ``len``).
REDUCTIONS = ("sum", "prod", "max", "min", "count")
#: The largest exact product of int64 digits: more digits need ``largest_digit``.
UNCAPPED_PRODUCT_DIGITS = 18


def parse_reductions(text: str) -> tuple[tuple[str, str], ...]:
    """Parse ``"sum"`` into ``(("", "sum"),)`` and ``"A:sum,M:prod"`` into ``(("A", "sum"), ("M", "prod"))``.

    Pairs are separated by commas or spaces; a ValueError names a bad pair or reduction.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"reductions must be a reduction name or 'CLASS:reduction,...', got {text!r}")
    if ":" not in text:
        pairs = [("", text.strip())]
    else:
        pairs = []
        for item in text.replace(",", " ").split():
            operator, sep, reduction = item.partition(":")
            if not sep or not operator:
                raise ValueError(f"reductions has {item!r}: write each operator as CLASS:reduction, e.g. A:sum")
            pairs.append((operator, reduction))
        if len({operator for operator, _ in pairs}) < len(pairs):
            raise ValueError(f"reductions {text!r} names an operator class twice")
    for _, reduction in pairs:
        if reduction not in REDUCTIONS:
            raise ValueError(f"reductions has {reduction!r}, not a reduction: use one of {', '.join(REDUCTIONS)}")
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class Task:
    """A scene-label task: ``reductions`` (`parse_reductions`) over ``min_digits``..``max_digits`` digits."""

    reductions: tuple[tuple[str, str], ...]
    min_digits: int
    max_digits: int
    largest_digit: int | None

    @property
    def operators(self) -> tuple[str, ...]:
        """The operator classes (none for a single reduction)."""
        return tuple(operator for operator, _ in self.reductions if operator)

    @property
    def most_objects(self) -> int:
        """The most glyphs a scene holds: ``max_digits``, plus the operator."""
        return self.max_digits + (1 if self.operators else 0)

    def check(self) -> None:
        """Refuse bounds that cannot hold, or products too large to be exact without a cap."""
        if self.min_digits > self.max_digits:
            raise ValueError(f"min_digits {self.min_digits} is more than max_digits {self.max_digits}")
        products = any(reduction == "prod" for _, reduction in self.reductions)
        if products and self.largest_digit is None and self.max_digits > UNCAPPED_PRODUCT_DIGITS:
            raise ValueError(
                f"a product of up to {self.max_digits} digits can exceed int64: give largest_digit (the cap) or "
                f"max_digits <= {UNCAPPED_PRODUCT_DIGITS}"
            )

    def classes(self, class_names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Return the digit classes' indices and values, and check the operators are classes (ValueError if not)."""
        missing = sorted(set(self.operators) - set(class_names))
        if missing:
            raise ValueError(
                f"reductions names operator classes {missing} that the glyph set does not have (its classes: "
                f"{', '.join(class_names)}): add them to characters, or use glyphs that have them"
            )
        digits = [i for i, name in enumerate(class_names)
                  if len(name) == 1 and name in "0123456789" and name not in self.operators]
        if not digits:
            raise ValueError(
                f"reductions need digit classes ('0' to '9') besides the operators, and the glyph set has none "
                f"(its classes: {', '.join(class_names)}): add digits to characters"
            )
        return np.array(digits, np.int64), np.array([int(class_names[i]) for i in digits], np.int64)

    def draw(
        self, rng: np.random.Generator, n: int, class_names: tuple[str, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return each scene's glyph count (int64 ``(n,)``), every glyph's class (int64, scene by scene, the
        operator first) and each scene's label (int64 ``(n,)``)."""
        digit_classes, digit_values = self.classes(class_names)
        n_digits = rng.integers(self.min_digits, self.max_digits + 1, n)
        picked = rng.integers(0, len(digit_classes), int(n_digits.sum()))
        values = np.zeros((n, self.max_digits), np.int64)
        filled = np.arange(self.max_digits) < n_digits[:, None]
        values[filled] = digit_values[picked]
        names = [reduction for _, reduction in self.reductions]
        if self.operators:
            operator = rng.integers(0, len(self.operators), n)
            operator_classes = np.array([class_names.index(name) for name in self.operators], np.int64)[operator]
        else:
            operator = np.zeros(n, np.int64)
        scene_label = np.zeros(n, np.int64)
        for which, reduction in enumerate(names):
            chosen = (operator == which) & (n_digits > 0)
            scene_label[chosen] = _reduce(reduction, values[chosen], filled[chosen])
        if self.largest_digit is not None:
            scene_label = np.minimum(scene_label, self.largest_digit)
        counts = n_digits + (1 if self.operators else 0)
        labels = digit_classes[picked]
        if self.operators:
            firsts = np.concatenate([[0], np.cumsum(n_digits)[:-1]])
            labels = np.insert(labels, firsts, operator_classes)
        return counts.astype(np.int64), labels, scene_label


def _reduce(reduction: str, values: np.ndarray, filled: np.ndarray) -> np.ndarray:
    """The reduction of each row's ``values`` where ``filled`` (every row has at least one)."""
    if reduction == "sum":
        return np.where(filled, values, 0).sum(1)
    if reduction == "prod":
        return np.where(filled, values, 1).prod(1)
    if reduction == "max":
        return np.where(filled, values, np.iinfo(np.int64).min).max(1)
    if reduction == "min":
        return np.where(filled, values, np.iinfo(np.int64).max).min(1)
    return filled.sum(1)
