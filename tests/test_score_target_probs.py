"""`score --target-model`: the target's probability of each answer token at the run's own
temperature, top-k and top-p from its own pass, so that an embedded run generated without
--logprobs (or at a temperature its raw logprobs do not fit) gets a sampled estimate."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import read_lines
from regen.cli import main
from regen.score.sampled import DrawnAt, drawn_at, drawn_logprobs

K = 3
PROMPTS = [
    "Say hello to a new colleague in one sentence.",
    "Tell me a fun fact about cats.",
    "Give me two tips for writing clear emails.",
]
SETTINGS = [(0.7, 0.9, 0), (0.5, 0.8, 20), (1.3, 0.95, 0), (0.7, 1.0, 10), (1.0, 0.6, 0)]


def llama_cpp_chain(logits: np.ndarray, temperature: float, top_p: float, top_k: int):
    """The drawn distribution by llama.cpp's own sampler chain, built as llama-cpp-python's
    `_init_sampler` builds it at regen's neutral settings (typical 1, min_p 0), up to the
    final draw."""
    import llama_cpp as lc

    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    for sampler in (
        lc.llama_sampler_init_top_k(top_k),
        lc.llama_sampler_init_typical(1.0, 1),
        lc.llama_sampler_init_top_p(top_p, 1),
        lc.llama_sampler_init_min_p(0.0, 1),
        lc.llama_sampler_init_temp(temperature),
    ):
        lc.llama_sampler_chain_add(chain, sampler)
    n = len(logits)
    data = (lc.llama_token_data * n)(
        *(lc.llama_token_data(i, float(x), 0.0) for i, x in enumerate(logits))
    )
    cur = lc.llama_token_data_array(data=data, size=n, selected=-1, sorted=False)
    lc.llama_sampler_apply(chain, ctypes.byref(cur))
    ids = [cur.data[i].id for i in range(cur.size)]
    z = np.array([cur.data[i].logit for i in range(cur.size)], dtype=np.float64)
    lc.llama_sampler_free(chain)
    p = np.zeros(n)
    p[ids] = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    return p


@pytest.mark.parametrize(("temperature", "top_p", "top_k"), SETTINGS)
def test_the_llamacpp_order_is_llama_cpps_own_sampler_chain(temperature, top_p, top_k):
    logits = np.random.default_rng(0).normal(0, 3, 200).astype(np.float32)
    vocab = np.arange(len(logits))
    want = llama_cpp_chain(logits, temperature, top_p, top_k)
    rows = np.repeat(logits[None], len(vocab), 0)
    at = DrawnAt(temperature, top_p, top_k, "raw", "llamacpp")
    assert np.exp(drawn_logprobs(rows, vocab, at)) == pytest.approx(want, abs=1e-6)
    if top_p < 1 and temperature != 1:  # vLLM's order (temperature first) differs then
        vllm = np.exp(drawn_logprobs(rows, vocab, DrawnAt(temperature, top_p, top_k)))
        assert np.abs(vllm - want).max() > 1e-3


def test_a_record_says_in_which_order_and_with_what_else_it_was_drawn():
    neutral = {
        "top_k": 0,
        "min_p": 0.0,
        "typical_p": 1.0,
        "repeat_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "mirostat_mode": 0,
    }
    llama = {
        "meta": {
            "sampling": {"temperature": 0.7, "top_p": 0.9, "neutral": neutral},
            "engine": {"name": "llamacpp"},
        }
    }
    assert drawn_at(llama) == DrawnAt(0.7, 0.9, 0, "raw", "llamacpp", None)
    llama["meta"]["sampling"]["extra"] = {"min_p": 0.1}
    assert drawn_at(llama).others == "drawn with min_p 0.1"
    del llama["meta"]["sampling"]["neutral"], llama["meta"]["sampling"]["extra"]
    # regen sent no neutral values: llama.cpp's own min_p and repeat penalty were applied
    assert "does not say the min_p" in drawn_at(llama).others
    vllm = {"meta": {"sampling": {"temperature": 0.7}, "engine": {"name": "vllm"}}}
    assert drawn_at(vllm) == DrawnAt(0.7) and drawn_at(vllm).order == "vllm"


def _generate(tmp_path, name: str, *flags: str):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            orjson.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": text}]}).decode()
            + "\n"
            for i, text in enumerate(PROMPTS)
        )
    )
    out = tmp_path / name
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--max-output-tokens",
        "12",
        "--display",
        "none",
        *flags,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """The embedded model's answers at temperature 0.7, top-p 0.9, without --logprobs."""
    tmp = tmp_path_factory.mktemp("sampled")
    return _generate(tmp, "run", "--temperature", "0.7", "--top-p", "0.9")


def _score(run, *flags: str) -> dict:
    args = ["--draft", "embedded", "--tokenizer", "embedded", "--k", str(K), "--all", "--json"]
    cli = CliRunner().invoke(main, ["score", str(run), *args, *flags])
    assert cli.exit_code == 0, cli.output
    return orjson.loads(cli.output)["drafts"][0]


@pytest.mark.model
def test_a_run_without_logprobs_at_temperature_0_7_gets_a_sampled_estimate(sampled_run):
    before = _score(sampled_run)  # no target probabilities: the draft proposes its argmax
    assert before["draft_sampling"] == "greedy" and "target_probabilities" not in before
    after = _score(sampled_run, "--target-model", "embedded")
    assert (after["estimate"], after["temperature"], after["draft_sampling"]) == (
        "sampled",
        0.7,
        "probabilistic",
    )
    overall = after["groups"]["(overall)"]
    assert overall["rows"] == len(PROMPTS) and not after["skipped"]
    assert after["target_probabilities"]["teacher_forced"]["rows"] == len(PROMPTS)
    assert after["target_probabilities"]["engine_logprobs"]["rows"] == 0
    assert after["identity"]["target"] == after["identity"]["draft"]  # the embedded GGUF
    tau = next(at for at in overall["by_k"] if at["k"] == K)["tau"]["value"]
    greedy = next(at for at in before["groups"]["(overall)"]["by_k"] if at["k"] == K)
    # the target as its own sampling draft: q = p but for the draft's batched pass
    assert 0.85 * (K + 1) <= tau <= K + 1
    assert tau > greedy["tau"]["value"] + 0.2  # its argmax misses the sampled tokens
    text = (sampled_run / "score" / "score.txt").read_text()  # the summary score printed
    assert (
        f"target probabilities: a teacher-forced pass of SmolLM2-135M-Instruct.Q4_1.gguf "
        f"for {len(PROMPTS)} rows, the engine's logprobs for 0 rows"
    ) in text


@pytest.mark.model
def test_the_target_pass_gives_the_servers_own_logprobs(tmp_path):
    """At temperature 1 without top-k/top-p the embedded server's --logprobs are the drawn
    ones: the target's pass, its rows side by side, gives the same numbers, and score keeps
    the server's."""
    from regen.check import Encoder
    from regen.embedded_model import default_model_path
    from regen.errors import InputError
    from regen.finished.record import Completion
    from regen.score.llama_draft import LlamaDraft
    from regen.score.llama_target_pass import RowsPass
    from regen.score.rows import groups_of
    from regen.score.target_probs import target_logprobs
    from regen.score.tokens import token_row

    run = _generate(tmp_path, "run", "--logprobs")
    encoder, target = Encoder.load("embedded"), LlamaDraft(default_model_path())
    rows = []
    for raw in read_lines(run, "completions"):
        completion = Completion.of(raw)
        try:  # a row re-tokenised into other tokens than the server's has no pair
            rows.append(token_row(completion, encoder, groups_of(completion)))
        except InputError:
            continue
    try:
        got = target_logprobs(RowsPass(target.llm), rows)
    finally:
        target.close()
    assert len(rows) >= 2
    for row, logprobs in zip(rows, got, strict=True):
        assert logprobs == pytest.approx(row.logprobs, abs=1e-4)
    draft = _score(run, "--target-model", "embedded")
    probs = draft["target_probabilities"]
    assert probs["engine_logprobs"]["rows"] == draft["groups"]["(overall)"]["rows"] > 0
    assert probs["teacher_forced"]["rows"] == 0


@pytest.mark.model
def test_rows_side_by_side_get_the_logits_of_each_row_alone():
    """One step decodes the next token of several rows, each its own sequence: the logits
    are those of the row decoded alone, to the bit (a batch over one row's answer is not)."""
    import numpy as np

    from regen.embedded_model import default_model_path
    from regen.score.llama_draft import LlamaDraft
    from regen.score.llama_target_pass import Job, RowsPass
    from sampling_loop import StepTarget

    def alone(llm, job: Job) -> np.ndarray:  # as the server decodes: one token a step
        one = StepTarget(llm)
        first = one.prefill(job.ids[: job.start])
        return np.stack([first, *(one.step(t) for t in job.ids[job.start : -1])])

    rng = np.random.default_rng(5)
    jobs = [
        Job([int(t) for t in rng.integers(200, 40000, n + a)], n)
        for n, a in ((30, 9), (12, 1), (75, 14), (41, 6), (9, 11))
    ]
    target = LlamaDraft(default_model_path(), n_ctx=512, threads=1)
    try:
        each = [alone(target.llm, j) for j in jobs]
        rows_pass = RowsPass(target.llm, rows=3)  # two passes: 3 rows, then 2
        together: list[list] = [[] for _ in jobs]
        for first in (0, 3):
            group = jobs[first : first + 3]
            assert all(rows_pass.fits(group[:i], j) for i, j in enumerate(group))
            for k, logits in rows_pass.logits(group):
                together[first + k].append(logits.copy())
        rows_pass.close()
    finally:
        target.close()
    for want, got in zip(each, together, strict=True):
        assert np.array_equal(want, np.stack(got).astype(np.float64))


@pytest.mark.model
def test_the_rows_file_is_the_same_in_one_process_or_two_workers(sampled_run, tmp_path):
    """The target's pass groups the rows each call gets (a worker gets a few at a time):
    whatever the groups, the rows file holds the same lines in the same order."""
    from regen.check import Encoder
    from regen.embedded_model import default_model_path
    from regen.executors.pool import LocalWorkers
    from regen.score import ScoreSettings, score_run
    from regen.score.llama_draft import LlamaDraft
    from regen.score.rows import Selection
    from regen.score.target_probs import with_target

    lines = read_lines(sampled_run, "completions")
    run = tmp_path / "run"
    (run / "completions").mkdir(parents=True)
    copies = [{**x, "id": f"c{n}-{i}"} for n in range(3) for i, x in enumerate(lines)]
    (run / "completions" / "00000.jsonl").write_bytes(
        b"".join(orjson.dumps(c) + b"\n" for c in copies)
    )
    encoder, settings = (
        Encoder.load("embedded"),
        ScoreSettings(Selection("category", None, 0), [K], "embedded"),
    )
    files = []
    for name, workers in (("one", None), ("two", LocalWorkers(2, small=1))):
        draft = LlamaDraft(default_model_path(), threads=1)
        target = LlamaDraft(default_model_path(), threads=1, flag="--target-model")
        try:
            drafts = with_target([draft], target)
            report = score_run(run, drafts, encoder, settings, tmp_path / name, workers=workers)
        finally:
            draft.close()
            target.close()
        assert report.drafts[0].groups["(overall)"].rows == len(copies)
        files.append(report.drafts[0].rows_file.read_bytes())
    assert files[0] == files[1]


@pytest.mark.model
def test_the_target_model_serves_a_draft_model_only(sampled_run):
    cli = CliRunner().invoke(
        main,
        [
            "score",
            str(sampled_run),
            "--draft",
            "ngram",
            "--tokenizer",
            "embedded",
            "--target-model",
            "embedded",
        ],
    )
    assert cli.exit_code == 2 and "--target-model serves a draft model that samples" in cli.output
    args = ["--draft", "embedded", "--tokenizer", "embedded", "--target-model", "t.bin"]
    cli = CliRunner().invoke(main, ["score", str(sampled_run), *args])
    assert cli.exit_code == 2 and "not a .gguf file or `embedded`" in cli.output
