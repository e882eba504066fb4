"""The snapshot comparison of tests/printed_code.py accepts another Python's layout of the
same code, and nothing else."""
import pytest
from printed_code import assert_same_code

EXPECTED = "for x, y in z:\n    # a\n    p, q = y\n"


def test_the_same_tree_and_comments_in_another_layout_pass():
    assert_same_code("for (x, y) in z:\n    # a\n    (p, q) = y\n", EXPECTED)


@pytest.mark.parametrize("actual", [
    "for x, y in z:\n    # b\n    p, q = y\n",          # another comment
    "for x, y in z:\n    p, q = y\n    # a\n",          # the comment on another line
    "for x, y in z:\n    # a\n    q, p = y\n",          # another tree
])
def test_anything_else_fails(actual):
    with pytest.raises(AssertionError):
        assert_same_code(actual, EXPECTED)
