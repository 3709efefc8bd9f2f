"""A trained drafter read from a folder, and the target it reads its hidden states from.

Modules:
    checkpoint.py      which kind a folder is, and the draft that scores it
    hf_draft.py        a Hugging Face causal LM used as a draft model
    eagle3_draft.py    a speculators EAGLE-3 head
    dflash_draft.py    a speculators DFlash drafter
    hidden_draft.py    what the two hidden-state heads share: the chain they draft
    spec_weights.py    a speculators folder's config and weights
    specforge_ckpt.py  a SpecForge checkpoint, converted by speculators' own converter
    hf_target.py       the target as a Hugging Face model: the hidden states the heads read
"""
