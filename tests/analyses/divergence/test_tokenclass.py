"""Token classes of a reply: characters first, then tokens through their byte spans."""

from rig.analyses.divergence.tokenclass import char_classes, output_names, token_classes


def spans(text: str, tools: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ch, cls in zip(text, char_classes(text, tools), strict=True):
        if out and out[-1][0] == cls:
            out[-1] = (cls, out[-1][1] + ch)
        else:
            out.append((cls, ch))
    return out


def test_json_call_list() -> None:
    text = '{"API": ["getWeather"], "parameters": [{"city": "Helsinki", "lat": 60.17, "at": "60.1, 24.9"}]}'
    s = spans(text)
    assert ("tool_name", "getWeather") in s
    assert ("argument", "Helsinki") in s
    assert ("number", "60.17") in s and ("number", "60.1, 24.9") in s  # a coordinate pair in a string too
    assert ("structure", '"], "parameters": [{"city": "') in s  # keys, quotes and punctuation are syntax


def test_python_list_and_known_tool_names() -> None:
    s = spans("['getWeather', 'other']", ("getWeather",))
    assert s == [
        ("structure", "['"),
        ("tool_name", "getWeather"),
        ("structure", "', '"),
        ("argument", "other"),
        ("structure", "']"),
    ]


def test_block_yaml() -> None:
    s = spans('API:\n  - getWeather\nparameters:\n  - city: "Helsinki"\n    n: 3')
    assert ("tool_name", "getWeather") in s and ("argument", "Helsinki") in s and ("number", "3") in s
    assert s[0] == ("structure", "API:\n  - ")


def test_thinking_free_text_and_fences() -> None:
    s = spans('<think>plan</think>Sure. ```json\n{"name": "route", "arguments": {"x": 1}}\n```')
    assert s[0] == ("thinking", "<think>plan</think>")
    assert ("free_text", "Sure. ") in s and ("tool_name", "route") in s and ("number", "1") in s
    assert s[-1] == ("structure", "```")


def test_token_classes_follow_byte_spans() -> None:
    text = '{"API": ["getWeather"]} é'
    pieces = [b'{"', b"API", b'":', b' ["', b"get", b"Weather", b'"]}', b" ", "é".encode()]
    assert b"".join(pieces) == text.encode()
    assert token_classes(text, pieces) == [
        "structure",
        "structure",
        "structure",
        "structure",
        "tool_name",
        "tool_name",
        "structure",
        "free_text",
        "free_text",
    ]


def test_names_from_the_parsed_output() -> None:
    assert output_names(["getWeather", "setAlarm"]) == {"getWeather", "setAlarm"}
    assert output_names({"API": ["a", "b"], "parameters": [{"name": "Alice"}]}) == {"a", "b"}
    assert output_names([{"name": "route", "arguments": {"x": 1}}]) == {"route"}
    assert output_names(None) == set()


def test_a_name_inside_arguments_is_an_argument() -> None:
    s = spans('{"name": "lookup", "arguments": {"name": "Alice", "tool": "hammer"}}')
    assert ("tool_name", "lookup") in s and ("argument", "Alice") in s and ("argument", "hammer") in s
