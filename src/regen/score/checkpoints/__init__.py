"""A trained drafter read from a folder, and the target it reads its hidden states from.

Modules:
    checkpoint.py      which kind a folder is, and the draft that scores it
    settings.py        what a checkpoint needs: its target, placement, depth, shared passes
    placement.py       where the target and the checkpoint run (--device, --dtype, batches)
    hf_draft.py        a Hugging Face causal LM used as a draft model
    eagle3_draft.py    a speculators EAGLE-3 head
    dflash_draft.py    a speculators DFlash drafter
    hidden_draft.py    what the two hidden-state heads share: the chain they draft
    sampled_chain.py   their sampled estimate on answers drawn at a temperature
    spec_weights.py    a speculators folder's config and weights
    converter.py       speculators' own converter, for other trainers' formats
    specforge_ckpt.py  a SpecForge EAGLE-3 checkpoint, converted
    dflash_convert.py  a z-lab or SpecForge DFlash checkpoint, converted
    hf_target.py       the target as a Hugging Face model: its layers, in both conventions
    target_pass.py     the target's hidden-state pass, batched, shared by the checkpoints
"""
