"""Shared test settings: a hypothesis profile sized for a 2-core machine."""

import os

import torch
from hypothesis import settings

settings.register_profile("course", deadline=None, max_examples=25, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))
torch.set_num_threads(1)
