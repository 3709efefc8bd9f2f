"""`score --target-model` with a Hugging Face draft folder (issue 54): a draft model proposes
from its own q as a GGUF draft does, so on a run drawn at temperature 0.7 without logprobs
score estimates min(1, q/p) per token with p from the target's own pass. Held against a real
speculative-sampling loop (sampling_loop.py) with the same draft and target: its answers are
the run, its accepted drafts per verify step the truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from drafter_helpers import target_dir, truncated_draft
from regen.cli import main
from regen.embedded_model import default_model_path
from regen.fleet.engine_defaults import LLAMACPP_NEUTRAL
from regen.tokenizer import load_tokenizer
from sampling_loop import Measured, StepTarget, speculate
from score_helpers import PROMPTS

pytestmark = pytest.mark.model
K, TEMPERATURE, MAX_NEW, SAMPLES = 2, 0.7, 32, 2


class CachedQ:
    """The draft's logits for the next token, with its KV cache cropped to what it has seen
    of the context (engines run a draft model so)."""

    def __init__(self, model) -> None:
        self.model, self.seen, self.past = model, [], None

    def __call__(self, context: list[int]) -> np.ndarray:
        import torch

        keep = 0
        while keep < min(len(self.seen), len(context) - 1) and self.seen[keep] == context[keep]:
            keep += 1
        if self.past is None:
            keep = 0
        elif keep < len(self.seen):
            self.past.crop(keep - len(self.seen))  # this version takes what to drop
        with torch.no_grad():
            out = self.model(
                input_ids=torch.tensor([context[keep:]]), past_key_values=self.past, use_cache=True
            )
        self.past, self.seen = out.past_key_values, list(context)
        return out.logits[0, -1].double().numpy()


def loop_run(root: Path, draft_model, tok) -> tuple[Path, Measured]:
    """The loop's answers as a run of the embedded engine at T = 0.7, without logprobs."""
    from llama_cpp import Llama

    # one thread: the logits are the same whatever the threads, and on two busy cores a
    # second thread spends a decode step waiting for the first
    llm = Llama(
        model_path=str(default_model_path()),
        n_ctx=512,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )
    target, q, rng = StepTarget(llm), CachedQ(draft_model), np.random.default_rng(11)
    measured, lines = Measured(), []
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    try:
        for category, prompts in PROMPTS.items():
            for n, text in enumerate(prompts):
                messages = [{"role": "user", "content": text}]
                rendered = tok.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
                prompt = tok(rendered, add_special_tokens=False)["input_ids"]
                for sample in range(SAMPLES):
                    speculate(
                        target,
                        q,
                        prompt,
                        k=K,
                        temperature=TEMPERATURE,
                        eos=eos,
                        max_new=MAX_NEW,
                        rng=rng,
                        measured=measured,
                    )
                    answer = measured.answers[-1]
                    content = tok.decode([t for t in answer if t != eos])
                    lines.append(
                        {
                            "id": f"{category}{n}",
                            "sample": sample,
                            "category": category,
                            "messages": [*messages, {"role": "assistant", "content": content}],
                            "finish_reason": "stop" if answer[-1] == eos else "length",
                            "token_ids": {"prompt": prompt, "completion": answer},
                            "meta": {
                                "sampling": {
                                    "temperature": TEMPERATURE,
                                    "neutral": LLAMACPP_NEUTRAL,
                                },
                                "engine": {"name": "llamacpp"},
                            },
                        }
                    )
    finally:
        llm.close()
    (root / "completions").mkdir(parents=True)
    (root / "completions" / "00000.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root, measured


def test_a_hugging_face_draft_scores_as_a_speculative_sampling_loop_accepts(tmp_path):
    from regen.score.drafts import open_draft

    folder = truncated_draft(target_dir(), tmp_path / "smol-24-blocks", blocks=24)
    draft = open_draft(str(folder), threads=1)
    try:
        run, loop = loop_run(tmp_path / "run", draft.model, load_tokenizer("embedded"))
    finally:
        draft.close()
    args = ["--draft", str(folder), "--tokenizer", "embedded", "--k", str(K), "--all", "--json"]
    args += ["--threads", "1"]  # two cores shared: a second thread mostly waits
    cli = CliRunner().invoke(main, ["score", str(run), *args, "--target-model", "embedded"])
    assert cli.exit_code == 0, cli.output
    scored = json.loads(cli.output)["drafts"][0]
    assert (scored["estimate"], scored["draft_sampling"]) == ("sampled", "probabilistic")
    assert scored["target_probabilities"]["teacher_forced"]["rows"] == len(loop.answers)
    overall = scored["groups"]["(overall)"]
    assert overall["rows"] == len(loop.answers) and not scored["skipped"]
    tau = next(at for at in overall["by_k"] if at["k"] == K)["tau"]["value"]
    # neither an identity nor a useless draft: the loop accepts some of its drafts
    assert 1.3 < loop.tau < K + 0.7, loop.tau
    # the estimate and the loop's count on the same answers, within the loop's own noise
    assert abs(tau - loop.tau) < 3 * loop.stderr + 0.02, (tau, loop.tau, loop.stderr)
