"""Does vLLM's `extract_hidden_states` run on the CPU build? (issue 55 item 5; score.md, "The
fleet's own hidden states"). Runs in the vLLM environment, not regen's:

    VLLM_CPU_KVCACHE_SPACE=1 PYTHONPATH=bench .venv-vllm/bin/python bench/vllm_hidden_states.py \\
        HF_FOLDER OUT_DIR [--cpu-write]

HF_FOLDER: the embedded SmolLM2 as a Hugging Face folder (bootstrap --test builds it). The
engine serves it with speculative method `extract_hidden_states` at input layers 2, 15 and 28
and the `ExampleHiddenStatesConnector` KV connector, answers one prompt, and the states file
is compared with the transformers model's block inputs at the same layers. As shipped the
connector's write needs CUDA (pinned memory, streams and events) and the engine's worker dies;
--cpu-write swaps that one method for a synchronous CPU write (CpuWriteConnector, an
experiment, not part of regen) to see whether the rest of the path works.
"""

from __future__ import annotations

import os
import sys

LAYERS = [2, 15, 28]


def _connector_base():
    from vllm.distributed.kv_transfer.kv_connector.v1 import example_hidden_states_connector

    return example_hidden_states_connector


class _Written:
    def query(self) -> bool:  # what get_finished asks of a copy event
        return True


def _cpu_write(self, pending) -> None:
    """The connector's write without CUDA: the request's slots read from the cache, saved."""
    import torch
    from safetensors.torch import save_file

    if not self._is_tp_rank_zero:
        return
    blocks = torch.tensor(pending.block_ids, dtype=torch.long)
    slots = (blocks[:, None] * self._block_size + torch.arange(self._block_size)[None]).flatten()
    base = _connector_base()
    states = base.extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0])
    os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
    tensors = {"hidden_states": states.clone(), "token_ids": pending.token_ids.clone()}
    save_file(tensors, pending.filename)
    lock_fd = self._lock_fds.pop(pending.req_id, None)
    if lock_fd is not None:
        os.close(lock_fd)
    self._req_copy_events[pending.req_id] = _Written()


def __getattr__(name: str):
    """`CpuWriteConnector`, built when vLLM's connector factory asks this module for it (the
    engine's process has vLLM loaded by then)."""
    if name != "CpuWriteConnector":
        raise AttributeError(name)
    base = _connector_base().ExampleHiddenStatesConnector
    return type(name, (base,), {"_submit_async_write": _cpu_write})


def main() -> int:
    import time

    folder, out, cpu_write = sys.argv[1], sys.argv[2], "--cpu-write" in sys.argv
    from vllm import LLM, SamplingParams

    began = time.time()
    connector = (
        {"kv_connector": "CpuWriteConnector", "kv_connector_module_path": "vllm_hidden_states"}
        if cpu_write
        else {"kv_connector": "ExampleHiddenStatesConnector"}
    )
    llm = LLM(
        model=folder,
        speculative_config={
            "method": "extract_hidden_states",
            "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": LAYERS}},
        },
        kv_transfer_config={
            **connector,
            "kv_role": "kv_producer",
            "kv_connector_extra_config": {"shared_storage_path": out},
        },
        enforce_eager=True,
        max_model_len=512,
        dtype="float32",
        gpu_memory_utilization=0.3,
    )
    print(f"LOADED in {time.time() - began:.0f} s", flush=True)
    prompt = {"prompt_token_ids": [1, 504, 3458, 282, 2386, 30, 1345, 253, 1176]}
    extra = {"kv_transfer_params": {"include_output_tokens": True}}
    (result,) = llm.generate(
        [prompt], SamplingParams(max_tokens=4, temperature=0, extra_args=extra)
    )
    path = (result.kv_transfer_params or {})["hidden_states_path"]
    print("OUTPUT", result.outputs[0].token_ids, "file", path, flush=True)
    data = _connector_base().load_hidden_states(path)
    compare(folder, data)
    return 0


def compare(folder: str, data: dict) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    states, ids = data["hidden_states"].float(), data["token_ids"]
    print("FILE hidden_states", tuple(states.shape), "token_ids", ids.tolist(), flush=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    seen: dict[int, torch.Tensor] = {}
    for i in LAYERS:
        model.model.layers[i].register_forward_pre_hook(
            lambda _m, a, kw, i=i: seen.__setitem__(i, a[0] if a else kw["hidden_states"]),
            with_kwargs=True,
        )
    with torch.no_grad():
        model.model(input_ids=ids[None])
    for n, i in enumerate(LAYERS):
        ref = seen[i][0]
        print(
            f"LAYER input index {i}: largest difference {(states[:, n] - ref).abs().max():.3g} "
            f"on values up to {ref.abs().max():.3g}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
