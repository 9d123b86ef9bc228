import json

import pytest

from rig.benchmarks.callnavi.scoring import score_output

GT = {
    "API": ["initiateTransfer", "getTransferStatus"],
    "parameters": [
        {"fromAccountID": "123456", "toAccountID": "654321", "amount": "1000", "currency": "USD"},
        {"transferID": "$$$"},
    ],
}


@pytest.mark.parametrize(
    "text, fmt, expect",
    [
        (json.dumps(GT), "json", {"syntax": 1, "structure": 1, "ast": 1}),
        ("```json\n" + json.dumps(GT) + "\n```", "json", {"syntax": 1, "structure": 1, "ast": 1}),
        (str(GT), "json", {"syntax": 1, "structure": 1, "ast": 1}),  # python-style quotes, upstream's direct parse
        (json.dumps(GT).replace('"1000"', "1000"), "json", {"syntax": 1, "structure": 1, "ast": 0}),
        ("Sure! Here is the JSON: {", "json", {"syntax": 0, "structure": 0, "ast": 0}),
        ("", "json", {"syntax": 0, "structure": 0, "ast": 0}),
        (
            'API:\n  - initiateTransfer\n  - getTransferStatus\nparameters:\n  - fromAccountID: "123456"\n'
            '    toAccountID: "654321"\n    amount: "1000"\n    currency: USD\n  - transferID: "TX-9"\n',
            "yaml",
            {"syntax": 1, "structure": 1, "ast": 1},
        ),
        ("I would call initiateTransfer.", "yaml", {"syntax": 0, "structure": 0, "ast": 0}),  # safe_load -> str
    ],
)
def test_params_scoring(text: str, fmt: str, expect: dict) -> None:
    scores, _value, reason = score_output(text, GT, "params", fmt)
    assert {k: scores[k] for k in expect} == expect
    assert (reason is None) == (expect["ast"] == 1)


@pytest.mark.parametrize(
    "text, fmt, ok",
    [
        ('["initiateTransfer", "getTransferStatus"]', "json", True),
        ("['initiatetransfer','gettransferstatus']", "json", True),
        ("initiateTransfer, getTransferStatus", "json", True),  # upstream normalisation
        ('["getTransferStatus", "initiateTransfer"]', "json", False),
        ("- initiateTransfer\n- getTransferStatus", "yaml", True),
        ("- initiateTransfer", "yaml", False),
    ],
)
def test_routing_scoring(text: str, fmt: str, ok: bool) -> None:
    assert score_output(text, GT, "routing", fmt)[0]["routing"] == float(ok)
