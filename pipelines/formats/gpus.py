"""GPU-equivalents of what a job was given, the same for every scheduler (DESIGN.md
"GPU-equivalents"): a whole GPU is 1; a MIG instance is its profile's fraction of the parent
GPU (the catalog's `mig_profiles`, else NVIDIA's A100/H100 rule `Ng` = N/7); a replica of a
GPU shared by time-slicing, MPS or Slurm shards is 1/replicas of it (the node pool's `sharing`
in settings.yaml).
"""

from __future__ import annotations

import re
from fractions import Fraction

from pipelines.catalog import ClusterSettings

# A MIG profile as Slurm types (`1g.10gb`, `a100_3g.40gb`, `nvidia_a100_1g.5gb`) and the
# Kubernetes device plugin (`nvidia.com/mig-1g.10gb`, `mig-1g.10gb+me`) spell it: the parent
# GPU's type may come first, media extensions (`+me`) last.
MIG_PROFILE = re.compile(r"(?:(?P<parent>.*?)[_-])?(?P<profile>(?P<slices>\d+)g\.\d+gb)(?:[.+]me)?")
MIG_SLICES = 7  # compute slices of an A100/H100: a `1g` instance is 1/7 of the GPU


def mig_profile(name: str) -> tuple[str, str | None] | None:
    """(profile, parent GPU type or None) of a MIG type name, None when it names no profile.
    `a100_3g.40gb` -> ('3g.40gb', 'a100'); `1g.10gb` -> ('1g.10gb', None)."""
    found = MIG_PROFILE.fullmatch(name.strip().lower())
    if found is None:
        return None
    return found["profile"], found["parent"] or None


def mig_equivalent(profile: str, settings: ClusterSettings) -> Fraction:
    """GPU-equivalents of one instance of `profile`: the catalog's entry for the profile
    (`1g.10gb`), else for its compute slices (`1g`), else N/7."""
    profile = profile.lower()
    slices = profile.split("g.", 1)[0] + "g"
    table = settings.mig_profiles
    if profile in table:
        return table[profile]
    if slices in table:
        return table[slices]
    return min(Fraction(int(slices[:-1]), MIG_SLICES), Fraction(1))


def gpu_text(gpus: Fraction) -> str:
    """Whole GPUs as an integer, fractions as the shortest float text that round-trips (the
    loader turns it back into 1/420ths of a GPU exactly)."""
    return str(gpus.numerator) if gpus.denominator == 1 else repr(float(gpus))
