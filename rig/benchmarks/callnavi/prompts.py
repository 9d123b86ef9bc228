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


# Bounds keep a looping model from running to max_tokens inside a constrained answer. They cost no correct answer
# on the upstream data (tests check each against every ground truth, and `rig selftest` plays every gold answer
# through the grammar): the longest chain is 5 calls, the longest value 29 characters (a longer one can only match a
# "$$$" wildcard, which any value matches), the longest API name 34, a call or object value at most 5 keys, lists 4
# items, and values nest two levels.
MAX_CALLS = 5
MAX_VALUE_CHARS = 32
MAX_NAME_CHARS = 64
# An API name is an identifier (every declared and every gold name of the upstream data is one): a grammar that let
# any string stand for a name let Qwen2.5-Coder 1.5B write its Python-list habit inside one string ("]['getX', 'a']").
NAME_PATTERN = f"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_CHARS - 1}}}$"
MAX_LIST_ITEMS = 5  # the data's longest list: 4
MAX_ARGS = 6  # keys of a call or of an object value (the data's most: 5)
VALUE_DEPTH = 3


def value_schema(depth: int = VALUE_DEPTH) -> dict:
    """Any argument value: a bounded string, a number or a boolean, and (``depth`` levels down) an object with any
    keys or a short list of such values. The gold answers are not held to the APIs' declarations (an argument the API
    list does not declare, an object or a list where a scalar is declared, a nested key the declared object lacks:
    about 6% of the upstream answers), so neither is the grammar."""
    scalar: list[dict] = [{"type": "string", "maxLength": MAX_VALUE_CHARS}, {"type": "number"}, {"type": "boolean"}]
    if depth <= 1:
        return {"anyOf": scalar}
    inner = value_schema(depth - 1)
    return {
        "anyOf": [
            *scalar,
            {"type": "object", "additionalProperties": inner, "maxProperties": MAX_ARGS},
            {"type": "array", "items": inner, "maxItems": MAX_LIST_ITEMS},
        ]
    }


def answer_schema(apis: list[Api], task: str) -> dict:
    """JSON schema of a well-formed answer, used when output is grammar-constrained.

    API names are any identifier of at most MAX_NAME_CHARS (upstream answers name APIs the domain's list lacks, such
    as aviation's ``getpassengerName``) and each call's arguments any keys with any value (``value_schema``). What the
    grammar holds is the shape: in the params task, ``parameters`` holds one object per listed API (or none: six
    shopping answers list an API with ``parameters: []``); without that tie a small model repeats argument objects
    until max_tokens. ``apis`` is kept for the signature's sake: the names are shown to the model in the prompt.
    """
    del apis  # the grammar no longer narrows names or keys to the declared ones (see the docstring)
    names = {"type": "string", "pattern": NAME_PATTERN}
    if task == "routing":
        return {"type": "array", "items": names, "minItems": 1, "maxItems": MAX_CALLS}
    call = {"type": "object", "additionalProperties": value_schema(VALUE_DEPTH), "maxProperties": MAX_ARGS}

    def answer(n: int) -> dict:
        return {
            "type": "object",
            "properties": {
                "API": {"type": "array", "items": names, "minItems": n, "maxItems": n},
                "parameters": {
                    "anyOf": [
                        {"type": "array", "items": call, "minItems": n, "maxItems": n},
                        {"type": "array", "maxItems": 0},
                    ]
                },
            },
            "required": ["API", "parameters"],
            "additionalProperties": False,
        }

    return {"anyOf": [answer(n) for n in range(1, MAX_CALLS + 1)]}
