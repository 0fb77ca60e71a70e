"""argparse types shared by the CLI and the benchmarks: a bad value is a usage error naming it."""

from __future__ import annotations

import argparse

import pytest

from graphrecall.cli_common import non_negative_int, positive_int, positive_int_list


def test_whole_numbers_are_checked_against_their_minimum() -> None:
    assert positive_int("3") == 3 and non_negative_int("0") == 0
    for bad, kind in (
        ("0", positive_int),
        ("-1", non_negative_int),
        ("2.5", positive_int),
        ("x", non_negative_int),
    ):
        with pytest.raises(argparse.ArgumentTypeError):
            kind(bad)


def test_a_list_of_sizes_is_comma_separated_positive_numbers() -> None:
    assert positive_int_list("60, 250,1000,") == [60, 250, 1000]
    with pytest.raises(argparse.ArgumentTypeError, match="'x'"):
        positive_int_list("60,x")
    with pytest.raises(argparse.ArgumentTypeError, match="at least one"):
        positive_int_list(" , ")
    with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
        positive_int_list("0")
