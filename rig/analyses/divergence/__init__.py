"""Token-level divergence of model variants on a reference run's own trajectories (`rig compare --divergence`).

The reference run's episodes are replayed through the benchmark (its own prompts and agent loop, each engine call
answered with the stored reply), so every (prompt, reply) pair the reference produced is recovered exactly; the
replayed request's hash is checked against the stored one. Each variant is then teacher-forced on those pairs
(prefill only, no generation) and every reply token gets: KL(reference || variant) over the full vocabulary, whether
the top-1 tokens agree, and the log-probability each model gives to the reference's token. llama.cpp gives full
distributions; vLLM gives only the top-k of ``prompt_logprobs``, so a pair with a vLLM side gets the coarse-grained
KL divergence of ``rig.engines.logits`` (known tokens plus one bucket for the rest), a lower bound labelled as such
(``bound``). A pair of one model is "self", of two engines "engine divergence", else "quantization". Tokens are
grouped by the part of the reply they belong to (``tokenclass``) and per episode, so divergence can be lined up
with the episodes whose scores flipped.

Everything is computed before anything is written; the results land in the output folder as ``divergence.csv``
(one row per variant and token class, plus ``all``), ``divergence_episodes.csv`` and ``divergence.json`` (the typed
``DivergenceReport``). The pass runs in a process of its own
(``python -m rig.analyses.divergence SETTINGS.json``), handed a JSON file of ``DivergenceSettings``, like every
variant of a comparison.
"""
