"""The lazy grammar processor against llama-cpp-python's own grammar sampling, on the real embedded model."""

import pytest

from rig.decoding import Constraint, to_gbnf
from rig.engines.llamacpp_grammar import GrammarError, LazyGrammar

pytestmark = pytest.mark.model

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "days": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
PROMPTS = [
    "<start_of_turn>user\nWeather in Oulu for the next days, as JSON.<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>user\nWrite a poem about the sea.<end_of_turn>\n<start_of_turn>model\n",
]


@pytest.fixture(scope="module")
def llm(embedded_weights: str):  # type: ignore[no-untyped-def]
    from llama_cpp import Llama

    m = Llama(model_path=embedded_weights, n_ctx=1024, n_threads=2, verbose=False, seed=0)
    yield m
    m.close()


def _run(llm, prompt: str, *, grammar=None, procs=None, n: int = 40) -> list[int]:  # type: ignore[no-untyped-def]
    import llama_cpp

    toks = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    llm.reset()  # evaluate the whole prompt each time: logits from a reused prefix differ in the last bits
    out: list[int] = []
    for t in llm.generate(
        toks, temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, grammar=grammar, logits_processor=procs
    ):
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, t) or len(out) >= n:
            break
        out.append(t)
    return out


@pytest.mark.parametrize("kind", ["json_schema", "yaml_schema"])
def test_greedy_lazy_grammar_matches_full_masking(llm, kind: str) -> None:  # type: ignore[no-untyped-def]
    import llama_cpp

    top_picks = 0
    gbnf = to_gbnf(Constraint(kind=kind, schema_=SCHEMA))
    for prompt in PROMPTS:
        n_prompt = len(llm.tokenize(prompt.encode(), add_bos=True, special=True))
        reference = _run(llm, prompt, grammar=llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False))
        lazy = LazyGrammar(llm._model.vocab, gbnf, llm.n_vocab(), n_prompt, greedy=True)
        full = LazyGrammar(llm._model.vocab, gbnf, llm.n_vocab(), n_prompt, greedy=False)
        try:
            assert _run(llm, prompt, procs=llama_cpp.LogitsProcessorList([lazy])) == reference
            assert _run(llm, prompt, procs=llama_cpp.LogitsProcessorList([full])) == reference
            assert full.full_masks == full.steps > 0
            assert lazy.steps == full.steps and lazy.full_masks < lazy.steps  # the model's choice mostly fits
            top_picks += lazy.top_picks
        finally:
            lazy.close()
            full.close()
        assert reference, prompt
    assert top_picks  # the second step (the best allowed of the top candidates) was exercised


def test_unparsable_grammar_is_an_error(llm) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GrammarError, match="could not parse"):
        LazyGrammar(llm._model.vocab, "root ::= missing", llm.n_vocab(), 0, greedy=True)


def test_bad_grammar_mask_is_refused_naming_entry_and_field() -> None:
    pytest.importorskip("llama_cpp")  # create_engine refuses an engine whose backend is missing
    from rig.engines import create_engine
    from rig.engines.base import EngineError
    from rig.registry import ModelSpec, Weights

    spec = ModelSpec(
        name="tiny",
        base="tiny",
        engine="llamacpp",
        weights=Weights(file="x.gguf"),
        quantization="q4",
        context_length=512,
        engine_args={"grammar_mask": "sometimes"},
    )
    with pytest.raises(
        EngineError, match=r"entry 'tiny': engine_args.grammar_mask 'sometimes' is not one of lazy, full"
    ):
        create_engine(spec, "x.gguf")
