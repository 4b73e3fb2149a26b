"""The few-shot benchmark splits: their class counts equal torchmeta's and learn2learn's; package data only."""
from __future__ import annotations

import json
from importlib import resources

import pytest

import glyphforge as gf
from glyphforge.datasets.omniglot.splits import PARTS, full_classes


def alphabets(classes: list[str]) -> set[str]:
    return {name.rpartition(",")[0] for name in classes}


def test_the_full_class_table_is_omniglots():
    classes = full_classes()
    assert len(classes) == len(set(classes)) == 1623
    background, evaluation = classes[:964], classes[964:]
    assert len(alphabets(list(background))) == 30 and len(alphabets(list(evaluation))) == 20
    assert background[0] == "Alphabet_of_the_Magi,1" and evaluation[0] == "Angelic,1"
    assert [c for c in classes if c.startswith("Latin,")] == [f"Latin,{n}" for n in range(1, 27)]  # by number


@pytest.mark.parametrize(("split", "counts"), [("vinyals", (1028, 172, 423)), ("ravi", (1100, 100, 423))])
def test_split_counts_equal_the_anchors(split, counts):
    """torchmeta's Vinyals split is 1028/172/423 classes; learn2learn's omniglot_tasksets cut 1100/100/423."""
    parts = [gf.omniglot_split(split, part) for part in PARTS]
    assert tuple(map(len, parts)) == counts
    assert sorted(c for part in parts for c in part) == sorted(full_classes())  # disjoint, every class once


def test_the_vinyals_split_is_torchmetas_by_alphabet():
    train, val, test = (gf.omniglot_split("vinyals", part) for part in PARTS)
    assert alphabets(val) == {"Armenian", "Bengali", "Early_Aramaic", "Hebrew", "Mkhedruli_(Georgian)"}
    assert len(alphabets(test)) == 13 and set(test) <= set(full_classes()[964:])  # evaluation alphabets only
    assert [c for c in test if c.startswith("Gurmukhi,")] == [f"Gurmukhi,{n}" for n in range(42, 46)]
    assert len([c for c in train if c.startswith("Gurmukhi,")]) == 41
    data = json.loads(resources.files("glyphforge.datasets").joinpath("omniglot_splits.json").read_text("utf-8"))
    assert "tristandeleu/pytorch-meta" in data["about"]  # the package data names its source


def test_the_ravi_split_is_seeded():
    assert gf.omniglot_split("ravi", "val") == gf.omniglot_split("ravi", "val", seed=0)
    other = gf.omniglot_split("ravi", "val", seed=1)
    assert len(other) == 100 and other != gf.omniglot_split("ravi", "val")


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        (("torchmeta", "train"), {}, r"unknown Omniglot split 'torchmeta': the known ones are ravi, vinyals"),
        (("vinyals", "validation"), {}, r"unknown split part 'validation': the known ones are test, train, val"),
        (("vinyals", "train"), {"seed": 3}, r"'vinyals' split is a fixed list of classes and takes no seed"),
        (("ravi", "train"), {"seed": -1}, r"seed must be an integer >= 0"),
    ],
)
def test_bad_split_arguments(arguments, options, message):
    with pytest.raises(ValueError, match=message):
        gf.omniglot_split(*arguments, **options)
