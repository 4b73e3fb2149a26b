import pytest

from glyphforge.textfmt import count, human_size, table


@pytest.mark.parametrize(
    "n, text", [(0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (1_234_567, "1.2 MB"), (5 * 10**15, "5000.0 TB")]
)
def test_human_size(n, text):
    assert human_size(n) == text


def test_table_aligns_columns():
    assert table(["a", "bee"], [["xx", 1], ["y", 22]]) == "a   bee\n--  ---\nxx  1\ny   22"


def test_count_uses_the_right_number():
    assert [count(n, "entry", "entries") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
    assert count(1, "shard") == "1 shard" and count(3, "shard") == "3 shards"
