"""Prompt rendering for CallNavi's two templates (routing names only; full calls with parameters).

The API documentation block reproduces the upstream rendering (including its quirks: every argument
labelled ``(str)`` and concatenated without separators) so that scores stay comparable with the paper.
The instructions are our own paraphrase. The API list comes first and the question last, so prompts of
one domain share a long prefix that llama.cpp-style engines reuse.
"""

from __future__ import annotations

import yaml

from rig.benchmarks.callnavi.data import Api


def render_api(api: Api) -> str:
    params = str(api.parameters).replace("[", "").replace("]", "")
    names = list(api.parameters) if isinstance(api.parameters, (dict, list)) else []
    args = "".join(f"{n} (str)" for n in names)
    returns = str(api.returnParameter).replace("{", "").replace("}", "").replace("'", "")
    return (
        f"Function:\ndef {api.name}({params})\n"
        f'    """\n    {api.description}\n\n    Args:\n    {args}\n\n    Returns:\n    {returns}\n    """\n'
    )


def render_api_list(apis: list[Api], fmt: str) -> str:
    if fmt == "yaml":
        return yaml.safe_dump([a.model_dump() for a in apis], sort_keys=False, allow_unicode=True)
    return "".join(render_api(a) for a in apis)


_INSTRUCTIONS = {
    ("params", "json"): (
        "Choose the API functions from the list above that answer the question, in the order they must be "
        "called, and give the arguments of each call. Reply with JSON only, no explanation, shaped like "
        '{"API": ["firstFunction", "secondFunction"], "parameters": [{"arg": "value"}, {"arg": "value"}]}, '
        'where parameters[i] holds the arguments of API[i] ({} for a call without arguments). Use "$$$" for '
        "any value that is not given in the question or that comes from the result of an earlier call."
    ),
    ("params", "yaml"): (
        "Choose the API functions from the list above that answer the question, in the order they must be "
        "called, and give the arguments of each call. Reply with a YAML document only, no explanation, with "
        "two keys: API (a list of function names) and parameters (a list with one mapping of arguments per "
        'call, {} for a call without arguments). Use "$$$" for any value that is not given in the question or '
        "that comes from the result of an earlier call. Example:\n"
        'API:\n  - firstFunction\n  - secondFunction\nparameters:\n  - arg: "value"\n  - arg: "$$$"'
    ),
    ("routing", "json"): (
        "Choose the API functions from the list above that answer the question, in the order they must be "
        "called. Reply with the function names only, as one list on one line, e.g. "
        "['firstFunction', 'secondFunction']. No parameters, no explanation."
    ),
    ("routing", "yaml"): (
        "Choose the API functions from the list above that answer the question, in the order they must be "
        "called. Reply with a YAML list of the function names only, no parameters, no explanation, e.g.\n"
        "- firstFunction\n- secondFunction"
    ),
}


def build_prompt(apis: list[Api], question: str, task: str, fmt: str) -> str:
    return (
        "You can call the following API functions.\nAPI list start\n"
        f"{render_api_list(apis, fmt)}API list end\n\n"
        f"{_INSTRUCTIONS[(task, fmt)]}\n\nQuestion start\n{question}\nQuestion end"
    )


# Bounds keep a looping model from running to max_tokens inside a constrained answer. They cost no correct answer:
# the dataset's longest chain is 5 calls and its longest argument value 29 characters (tests check both), so a
# longer value can only match a "$$$" wildcard, which any value matches.
MAX_CALLS = 5
MAX_VALUE_CHARS = 32


def _value_schema(declared: object) -> dict:
    if isinstance(declared, dict) and declared:
        return {
            "type": "object",
            "properties": {k: _value_schema(v) for k, v in declared.items()},
            "additionalProperties": False,
        }
    return {"anyOf": [{"type": "string", "maxLength": MAX_VALUE_CHARS}, {"type": "number"}, {"type": "boolean"}]}


def _call_schema(api: Api) -> dict:
    p = api.parameters
    declared = dict(p) if isinstance(p, dict) else {n: "string" for n in p} if isinstance(p, list) else {}
    return {
        "type": "object",
        "properties": {k: _value_schema(v) for k, v in declared.items()},
        "additionalProperties": False,
    }


def answer_schema(apis: list[Api], task: str) -> dict:
    """JSON schema of a well-formed answer, used when output is grammar-constrained.

    API names are limited to the domain's list and each call's arguments to the keys some API declares. In the
    params task, ``parameters`` holds one object per listed API (or none: six shopping answers in the dataset
    list an API with ``parameters: []``); without that tie a small model repeats argument objects until
    max_tokens.
    """
    names = {"type": "string", "enum": sorted({a.name for a in apis})}
    if task == "routing":
        return {"type": "array", "items": names, "minItems": 1, "maxItems": MAX_CALLS}
    calls = {"anyOf": [_call_schema(a) for a in apis]} if apis else {"type": "object"}

    def answer(n: int) -> dict:
        return {
            "type": "object",
            "properties": {
                "API": {"type": "array", "items": names, "minItems": n, "maxItems": n},
                "parameters": {
                    "anyOf": [
                        {"type": "array", "items": calls, "minItems": n, "maxItems": n},
                        {"type": "array", "maxItems": 0},
                    ]
                },
            },
            "required": ["API", "parameters"],
            "additionalProperties": False,
        }

    return {"anyOf": [answer(n) for n in range(1, MAX_CALLS + 1)]}
