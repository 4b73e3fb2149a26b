import hashlib
from pathlib import Path

import numpy as np
import pytest

from glyphforge.cache import FORMAT_VERSION, CacheStore, cache_key
from glyphforge.cache.keys import canonical_json, metadata_sha256


def test_equal_parameters_give_equal_keys():
    a = cache_key("emnist", {"shape": (14, 14), "split": "byclass", "level": np.int64(3)})
    b = cache_key("emnist", {"split": "byclass", "level": 3, "shape": [np.uint8(14), 14]})
    assert a == b
    assert len(a) == 64 and int(a, 16) >= 0


def test_equal_numbers_of_different_types_give_equal_keys():
    assert cache_key("k", {"range": (0, 1)}) == cache_key("k", {"range": [0.0, np.float32(1.0)]})
    assert canonical_json("k", {"x": -2.0, "y": 0.25}) == f'["k",{{"x":-2,"y":0.25}},{FORMAT_VERSION}]'
    assert cache_key("k", {"x": 1}) != cache_key("k", {"x": True})  # a flag is not a count


def test_different_parameters_kinds_and_types_give_different_keys():
    base = cache_key("emnist", {"shape": [14, 14]})
    assert cache_key("emnist", {"shape": [14, 15]}) != base
    assert cache_key("omniglot", {"shape": [14, 14]}) != base
    assert cache_key("emnist", {"shape": ["14", "14"]}) != base


def test_paths_sets_arrays_and_floats_are_normalised():
    text = canonical_json(
        "k", {"p": Path("/a/b"), "s": {3, 1, 2}, "arr": np.array([[1, 2]]), "f": np.float32(0.5)}
    )
    assert text == f'["k",{{"arr":[[1,2]],"f":0.5,"p":"/a/b","s":[1,2,3]}},{FORMAT_VERSION}]'


def test_store_key_matches_module_function(tmp_path):
    assert CacheStore(tmp_path).key("k", {"x": 1}) == cache_key("k", {"x": 1})


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"x": object()}, TypeError, r"params\['x'\] is a object"),
        ({1: "x"}, TypeError, "parameter names must be strings"),
        ({"x": float("nan")}, ValueError, "finite"),
    ],
)
def test_parameters_without_canonical_form_are_refused(params, error, message):
    with pytest.raises(error, match=message):
        cache_key("k", params)


@pytest.mark.parametrize("kind", ["", "../x", "a/b", ".hidden", "with space"])
def test_unsafe_kinds_are_refused(kind):
    with pytest.raises(ValueError, match="cache kind must be"):
        cache_key(kind, {})


def test_a_key_of_another_format_version_differs():
    assert FORMAT_VERSION == 4  # class files numpy pickles; 3: isal .pklz; 0.3 wrote format 2, 0.1 and 0.2 format 1
    assert canonical_json("k", {"x": 1}, format_version=1) == '["k",{"x":1},1]'
    assert cache_key("k", {"x": 1}, 1) != cache_key("k", {"x": 1}) == cache_key("k", {"x": 1}, FORMAT_VERSION)


def test_the_metadata_hash_covers_kind_key_params_and_meta_canonically():
    digest = metadata_sha256("k", "ab" * 32, {"x": [1, 2]}, {"note": "é", "n": 3})
    text = '{"key":"' + "ab" * 32 + '","kind":"k","meta":{"n":3,"note":"\\u00e9"},"params":{"x":[1,2]}}'
    assert digest == hashlib.sha256(text.encode("ascii")).hexdigest()
    assert metadata_sha256("k", "ab" * 32, {"x": [1, 2]}, {"n": 3, "note": "é"}) == digest  # key order is irrelevant
    assert metadata_sha256("k", "ab" * 32, {"x": [1, 2]}, {"note": "é", "n": 4}) != digest
    assert metadata_sha256("k", "cd" * 32, {"x": [1, 2]}, {"note": "é", "n": 3}) != digest
    with pytest.raises(ValueError):
        metadata_sha256("k", "ab" * 32, {}, {"x": float("nan")})
