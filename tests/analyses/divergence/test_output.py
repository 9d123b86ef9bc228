from rig.analyses.divergence.output import _delta


def test_a_tiny_score_change_is_not_printed_as_a_signed_zero() -> None:
    """A RouteEval reply that changed its similarity score by 6e-7 was shown as -0.000 in the flipped-episodes table."""
    assert _delta(-6.213711922775644e-07) == "-6.2e-07"
    assert _delta(0.25) == "+0.250" and _delta(-1.0) == "-1.000"
    assert _delta(3e-4) == "+3.0e-04" and _delta(-0.0006) == "-0.001"
    assert _delta(None) == "not measured"
